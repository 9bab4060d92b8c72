#include "meshtrain/comm/collectives/cost_model.hpp"

#include <algorithm>
#include <bit>
#include <string>

#include "meshtrain/core/error.hpp"

namespace meshtrain::comm {

std::string_view algorithm_name(AllReduceAlgorithm algorithm) {
  switch (algorithm) {
    case AllReduceAlgorithm::Auto: return "auto";
    case AllReduceAlgorithm::Ring: return "ring";
    case AllReduceAlgorithm::Tree: return "tree";
    case AllReduceAlgorithm::HalvingDoubling: return "halving-doubling";
    case AllReduceAlgorithm::RecursiveDoubling: return "recursive-doubling";
    case AllReduceAlgorithm::ReductionServer: return "reduction_server";
  }
  return "?";
}

AllReduceAlgorithm parse_all_reduce_algorithm(std::string_view name) {
  if (name == "hd") return AllReduceAlgorithm::HalvingDoubling;
  if (name == "rd") return AllReduceAlgorithm::RecursiveDoubling;
  if (const auto algorithm = parse_enum<AllReduceAlgorithm>(name)) return *algorithm;
  throw ConfigError("unknown all-reduce algorithm '" + std::string(name) + "' (" +
                    enum_choices<AllReduceAlgorithm>() + ")");
}

std::string_view reduce_kind_name(ReduceKind kind) {
  switch (kind) {
    case ReduceKind::Sum: return "sum";
    case ReduceKind::Avg: return "avg";
    case ReduceKind::Max: return "max";
    case ReduceKind::Min: return "min";
  }
  return "?";
}

const AlgorithmCost& CostTable::row(AllReduceAlgorithm algorithm) const {
  for (const AlgorithmCost& r : all_reduce)
    if (r.algorithm == algorithm) return r;
  throw CommError("cost table has no row for all-reduce algorithm " + std::string(algorithm_name(algorithm)));
}

CostTable CostTable::on_one_link(double alpha_s, double beta_s_per_byte) {
  CostTable table;
  const double ring_beta = table.row(AllReduceAlgorithm::Ring).beta_s_per_byte;
  for (AlgorithmCost& r : table.all_reduce) {
    r.alpha_s = alpha_s;
    r.beta_s_per_byte = beta_s_per_byte * (r.beta_s_per_byte / ring_beta);
  }
  return table;
}

double all_reduce_seconds(const CostTable& table, AllReduceAlgorithm algorithm, size_t bytes, int ranks) {
  if (ranks <= 1) return 0.0;
  const AlgorithmCost& cost = table.row(algorithm);
  const double n = ranks, b = double(bytes);
  switch (algorithm) {
    case AllReduceAlgorithm::Ring:
      return 2 * (n - 1) * cost.alpha_s + 2 * (n - 1) / n * b * cost.beta_s_per_byte;
    case AllReduceAlgorithm::Tree: {
      const double depth = std::bit_width(unsigned(ranks)) - 1;
      const size_t chunk = std::max<size_t>(table.tree_chunk_bytes, 1);
      const double chunks = std::max<size_t>((bytes + chunk - 1) / chunk, 1);
      const double chunk_bytes = double(std::min(bytes, chunk));
      return 2 * (depth + chunks - 1) * (cost.alpha_s + 2 * chunk_bytes * cost.beta_s_per_byte);
    }
    case AllReduceAlgorithm::HalvingDoubling: {
      const unsigned p = std::bit_floor(unsigned(ranks));
      double t = 2 * std::countr_zero(p) * cost.alpha_s + 2 * (p - 1.0) / p * b * cost.beta_s_per_byte;
      if (p != unsigned(ranks)) t += 2 * cost.alpha_s + 2 * b * cost.beta_s_per_byte;
      return t;
    }
    case AllReduceAlgorithm::RecursiveDoubling: {
      const unsigned p = std::bit_floor(unsigned(ranks));
      double t = std::countr_zero(p) * (cost.alpha_s + b * cost.beta_s_per_byte);
      if (p != unsigned(ranks)) t += 2 * (cost.alpha_s + b * cost.beta_s_per_byte);
      return t;
    }
    case AllReduceAlgorithm::ReductionServer:
      // Every worker sends and receives its B bytes once, in two latency
      // steps, when the reducers' links together match the workers'.
      return 2 * cost.alpha_s + b * cost.beta_s_per_byte;
    case AllReduceAlgorithm::Auto: break;
  }
  throw CommError("all_reduce_seconds: pick a concrete algorithm, not auto");
}

double all_gather_seconds(const CostTable& table, size_t bytes, int ranks) {
  if (ranks <= 1) return 0.0;
  const AlgorithmCost& ring = table.row(AllReduceAlgorithm::Ring);
  const double n = ranks;
  return (n - 1) * ring.alpha_s + (n - 1) / n * double(bytes) * ring.beta_s_per_byte;
}

AllReduceAlgorithm choose_all_reduce(const CostTable& table, size_t bytes, int ranks) {
  AllReduceAlgorithm best = AllReduceAlgorithm::Ring;
  double best_s = all_reduce_seconds(table, best, bytes, ranks);
  for (AllReduceAlgorithm a :
       {AllReduceAlgorithm::HalvingDoubling, AllReduceAlgorithm::Tree, AllReduceAlgorithm::RecursiveDoubling}) {
    const double s = all_reduce_seconds(table, a, bytes, ranks);
    if (s < best_s) best = a, best_s = s;
  }
  return best;
}

double exposed_seconds(double piece_s, int pieces, double window_s) {
  if (pieces <= 0 || piece_s <= 0) return 0.0;
  return piece_s + (pieces - 1) * std::max(0.0, piece_s - window_s / pieces);
}

double exposed_seconds(std::span<const double> piece_s, std::span<const double> ready_s, double window_s) {
  if (piece_s.size() != ready_s.size()) throw CommError("exposed_seconds: one ready time per piece");
  if (piece_s.empty()) return 0.0;
  double free_at = 0;
  for (size_t i = 0; i < piece_s.size(); ++i) free_at = std::max(free_at, ready_s[i]) + piece_s[i];
  return std::max(0.0, free_at - window_s);
}

}  // namespace meshtrain::comm

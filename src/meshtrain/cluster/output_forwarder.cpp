#include "meshtrain/cluster/output_forwarder.hpp"

namespace meshtrain {
namespace {

constexpr std::string_view kEraseLine = "\033[2K";

// What a terminal would show of text drawn over itself: the part after the
// last carriage return, without erase-line sequences.
std::string visible(std::string_view text) {
  if (size_t cr = text.rfind('\r'); cr != std::string_view::npos) text.remove_prefix(cr + 1);
  std::string out(text);
  for (size_t at; (at = out.find(kEraseLine)) != std::string::npos;) out.erase(at, kEraseLine.size());
  return out;
}

}  // namespace

void OutputForwarder::feed(const std::string& label, std::string& pending, std::string_view data) {
  pending.append(data);
  size_t start = 0, nl;
  while ((nl = pending.find('\n', start)) != std::string::npos) {
    // The owner's status line ends in a line of its own (the final bar, or a
    // message printed over it): it is no longer a status line.
    if (label == status_owner_) {
      clear_status();
      status_.clear();
      status_owner_.clear();
    }
    const std::string text = visible(std::string_view(pending).substr(start, nl - start));
    line(label, text);
    if (!text.empty()) {
      std::deque<std::string>& recent = recent_[label];
      recent.push_back(text.substr(0, kRecentLineChars));
      if (recent.size() > kRecentLines) recent.pop_front();
    }
    start = nl + 1;
  }
  pending.erase(0, start);
  if (terminal_ && pending.find('\r') != std::string::npos) {
    pending.erase(0, pending.rfind('\r'));  // earlier drawings of the line are gone from the screen too
    clear_status();
    status_ = "[" + label + "] " + visible(pending);
    status_owner_ = label;
    draw_status();
    std::fflush(out_);
  }
}

void OutputForwarder::flush(const std::string& label, std::string& pending) {
  if (!pending.empty()) feed(label, pending, "\n");
}

void OutputForwarder::line(const std::string& label, std::string_view text) {
  clear_status();
  std::fprintf(out_, "[%s] %.*s\n", label.c_str(), static_cast<int>(text.size()), text.data());
  draw_status();
  std::fflush(out_);
}

std::vector<std::string> OutputForwarder::recent_lines(const std::string& label) const {
  const auto it = recent_.find(label);
  if (it == recent_.end()) return {};
  return {it->second.begin(), it->second.end()};
}

void OutputForwarder::clear_status() {
  if (!status_.empty()) std::fprintf(out_, "\r%.*s", static_cast<int>(kEraseLine.size()), kEraseLine.data());
}

void OutputForwarder::draw_status() {
  if (!status_.empty()) std::fputs(status_.c_str(), out_);
}

}  // namespace meshtrain

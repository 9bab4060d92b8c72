#include "meshtrain/data/dataset.hpp"

namespace meshtrain {

std::string_view split_name(Split split) {
  return split == Split::Train ? "train" : "validation";
}

}  // namespace meshtrain

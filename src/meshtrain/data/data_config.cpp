#include "meshtrain/data/data_config.hpp"

#include "meshtrain/core/error.hpp"
#include "meshtrain/data/fashion_mnist.hpp"
#include "meshtrain/data/text_dataset.hpp"
#include "meshtrain/data/tokens/token_dataset.hpp"

namespace meshtrain {

std::shared_ptr<const Dataset> make_dataset(const DataConfig& config, int64_t seq_len) {
  if (config.kind == DataKind::Text) {
    const std::string path = config.path.empty() ? kDefaultTextPath : config.path;
    try {
      return std::make_shared<TextDataset>(path, seq_len, config.val_fraction);
    } catch (const DataError& e) {
      // The default corpus is not in git; say how to make it.
      if (config.path.empty())
        throw DataError(std::string(e.what()) + " (run scripts/prepare-data.sh to write it)");
      throw;
    }
  }
  if (config.kind == DataKind::Tokens)
    return std::make_shared<TokenDataset>(
        TokenDatasetOptions{.train_path = config.train_path, .val_path = config.val_path, .seq_len = seq_len,
                            .vocab_size = config.vocab_size, .val_fraction = config.val_fraction});
  return std::make_shared<FashionMnistDataset>(config.path.empty() ? kFashionMnistDefaultDir : config.path);
}

}  // namespace meshtrain

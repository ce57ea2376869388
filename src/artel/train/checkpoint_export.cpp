#include "artel/train/checkpoint_export.h"

#include <map>
#include <utility>

#include "artel/nn/safetensors.h"

namespace artel::train {

void export_weights(const ShardedCheckpoint& ck, const std::string& path) {
  const std::string model = kModelKey;
  std::map<std::string, std::pair<DType, Shape>> layout;
  for (const ManifestTensor& t : ck.manifest().tensors)
    if (t.key.compare(0, model.size(), model) == 0) layout[t.key.substr(model.size())] = {t.dtype, t.shape};
  if (layout.empty())
    throw Error("checkpoint " + ck.dir() + " holds no model weights", "export a checkpoint written by `artel train`");
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"},
      {"model", ck.manifest().model.value("model_kind", std::string("unknown"))},
      {"step", std::to_string(ck.manifest().step)}};
  nn::SafetensorsWriter file(path, layout, metadata);
  for (const auto& [name, _] : layout) file.write(name, ck.read_whole(model + name));  // one whole tensor at a time
  file.commit();
}

}  // namespace artel::train

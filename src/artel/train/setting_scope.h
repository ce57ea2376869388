// Settings that act only in some runs: --momentum only with SGD, --schedule
// only with a pipeline, --n-layer only for the text models. A value set for
// one that the run never reads would be dropped without a word, and the user
// would believe it took effect; resolve_config refuses it instead, naming the
// setting, what it goes with, and what this run has.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "artel/train/train_config.h"

namespace artel::train {

// Throws artel::Error for the first key of `given` that `cfg`'s run does not
// read, unless its value is `defaults`' (a setting that would change nothing
// either way, as a script that passes every key has). `flags` holds the keys
// that came from the command line, with their text (the others came from
// --config).
void refuse_settings_without_effect(const TrainConfig& cfg, const TrainConfig& defaults,
                                    const std::vector<std::string>& given, const std::map<std::string, std::string>& flags);

}  // namespace artel::train

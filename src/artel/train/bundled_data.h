// Finding the data the project ships (data/tinyshakespeare.txt,
// data/mnist-t10k/), so `artel` with no arguments works both from a checkout
// (./build/artel, from anywhere in it) and installed (P/bin/artel next to
// P/share/artel/data/). The search looks in <executable's folder>/../share/artel
// (the installed layout), then goes up from the executable's folder, then
// from the working directory, to the first folder holding `data/<name>`.
//
//   std::string text = find_bundled_data("tinyshakespeare.txt");
//   std::string root = project_root();   // the folder that holds data/: the checkout, or P/share/artel
#pragma once

#include <string>
#include <vector>

namespace artel::train {

// The path of data/<name>; throws artel::Error (with a hint to pass --data)
// when none of the folders searched has it.
std::string find_bundled_data(const std::string& name);

// The folder that holds data/ (the checkout, or P/share/artel when installed);
// same search. Helper files live beside data/ there (e.g. tools/).
std::string project_root();

// The bundled data set of a model: the text for gpt, the MNIST folder otherwise.
std::string default_data_for(const std::string& model);

// The folders searched for data/<name>, in order, for an executable in
// `exe_dir` run from `cwd`: exe_dir/../share/artel, then exe_dir and up to four
// of its parents, then cwd and up to four of its parents. Empty inputs are skipped.
std::vector<std::string> bundled_data_roots(const std::string& exe_dir, const std::string& cwd);
// The search of find_bundled_data and project_root over given folders.
std::string find_bundled_data(const std::string& name, const std::vector<std::string>& roots);
std::string project_root(const std::vector<std::string>& roots);

}  // namespace artel::train

// Finding the data the project ships (data/tinyshakespeare.txt,
// data/mnist-t10k/), so `./build/artel` works with no arguments from anywhere
// in the checkout: the search goes up from the executable's directory, then
// from the working directory, to the first folder holding `data/<name>`.
//
//   std::string text = find_bundled_data("tinyshakespeare.txt");
//   std::string root = project_root();   // the folder that holds data/
#pragma once

#include <string>

namespace artel::train {

// The path of data/<name> in the project; throws artel::Error (with a hint to
// pass --data) when no folder above the executable or the working directory
// has it.
std::string find_bundled_data(const std::string& name);

// The checkout the bundled data lives in (the parent of data/); same search.
std::string project_root();

// The bundled data set of a model: the text for gpt, the MNIST folder otherwise.
std::string default_data_for(const std::string& model);

}  // namespace artel::train

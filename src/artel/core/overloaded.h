// Overloaded: one visitor out of several lambdas, for std::visit over a
// variant (the pipeline's instructions, for one).
//
//   std::visit(Overloaded{[](const Forward& f) { ... }, [](const Backward& b) { ... }}, instruction);
#pragma once

namespace artel {

template <class... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;

}  // namespace artel

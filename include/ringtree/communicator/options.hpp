#pragma once
// What a communicator is opened with besides its transport. The entries
// that decide what runs must be the same on every rank (settings.hpp).
#include <optional>

#include <ringtree/algorithms/vocabulary.hpp>
#include <ringtree/core/config.hpp>
#include <ringtree/tuning/cost_model.hpp>

namespace ringtree {

struct communicator_options {
  bool checked = false;            // or RINGTREE_CHECK=1
  std::optional<algorithm> algo{}; // replaces automatic where offered (as RINGTREE_ALGO does; this wins)
  chunk_sizes chunks{};            // pipeline chunk sizes
  std::optional<cost_model> model{}; // set: automatic chooses by this model instead of measuring
  std::optional<config::tuning> tune{}; // set: replaces RINGTREE_TUNE (libringtree-mpi: cached, unless the variable is set)
  // Point to point only, no collectives: what recv from any_source needs
  // (a peer's collective messages would share the stream it looks at).
  bool point_to_point_only = false;
};

}  // namespace ringtree

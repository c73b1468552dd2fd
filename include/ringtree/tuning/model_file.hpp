#pragma once
// The cost model's file: its constants as 'name = value' lines the user can
// read and edit, kept apart from measuring them (tuning/calibration.hpp) so
// that a tool or a test can read and write the file without the measurements.
//
// The file: RINGTREE_MODEL_FILE, else
//   ${RINGTREE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ringtree}/model-<transport>-<n>ranks.txt
#include <algorithm>
#include <cstddef>
#include <istream>
#include <optional>
#include <sstream>
#include <string>

#include <ringtree/core/compiled.hpp>
#include <ringtree/core/config.hpp>
#include <ringtree/core/error.hpp>
#include <ringtree/tuning/cache_files.hpp>
#include <ringtree/tuning/cost_model.hpp>

namespace ringtree {
namespace detail {

std::string model_path(const std::string& transport, int ranks, const config& c);

// The constants in a model file's text; `path` names it in errors.
inline constexpr std::size_t max_model_line = 1024;
cost_model parse_model(std::istream& in, const std::string& path, int rank);

// The file's constants, if it exists; a file that does not parse is an
// error naming the file and line, never silently replaced.
std::optional<cost_model> read_model(const std::string& path, int rank);

void write_model(const std::string& path, const cost_model& m, const std::string& transport, int ranks);

// The models this process already loaded or measured, by file.
loaded_files<cost_model>& loaded_models();

}  // namespace detail
}  // namespace ringtree

#if RINGTREE_DEFINES
#include <ringtree/tuning/model_file-inl.hpp>
#endif

#pragma once
// What the tuning caches share: reading and writing their small text files
// safely (a cache that cannot be used costs measurements, never the run),
// and the keys they are filed under: the transport and its layout
// (cache_name), the CPU (cpu_model) and when and where a measurement was
// made (measured_stamp). The model file (tuning/model_file.hpp) and the
// choice cache (tuning/choice_cache.hpp) are both made of these.
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ringtree/core/compiled.hpp>
#include <ringtree/core/error.hpp>
#include <ringtree/transport/topology.hpp>
#include <ringtree/transport/transport.hpp>

namespace ringtree {
namespace detail {

// A cache that cannot be used is no error: tuning goes on in memory. One
// warning per directory and process says where and why (the errno), so
// that a HOME without a usable ~/.cache costs measurements, not the run.
void cache_unusable(const std::string& path, const char* doing, int err);

// A small text file's contents, if it exists and can be opened (else a
// warning, above); `what` names it in errors. Only a regular file of at
// most max_model_file_bytes is read (a FIFO would block, a device like
// /dev/zero never ends), opened without blocking.
inline constexpr std::size_t max_model_file_bytes = 64 * 1024;
// Errors are raised as `call`'s, naming the file a `what` ("model") file.
std::optional<std::string> read_text_file(const std::string& path, const char* call, const char* what, int rank);

// Best effort: written to a temporary file, then renamed over the old one,
// so readers never see half a file. A cache that cannot be written costs a
// measurement next time (and a warning, once).
void write_text_file(const std::string& path, const std::string& text);

// "2026-11-30 14:00:00 on host": when and where a measurement was made.
std::string measured_stamp();

// The name a transport's cache files go by: its name, and where its ranks
// span hosts, their layout ("cluster-2x2-<hash of who is where>"): the
// fastest algorithm depends on it.
template <transport T>
std::string cache_name(const T& t) {
  std::string name = transport_name<T>();
  if constexpr (hierarchical_transport<T>) {
    const auto& l = t.layout();
    if (l.hosts() > 1) {
      std::uint32_t h = 2166136261u;  // FNV-1a of the host of every rank
      for (int r = 0; r < l.ranks(); ++r) h = (h ^ static_cast<std::uint32_t>(l.host_of(r))) * 16777619u;
      char tag[16];
      std::snprintf(tag, sizeof tag, "%06x", h & 0xffffffu);
      name += cat("-", l.describe(), "-", tag);
    }
  }
  return name;
}

// What this process already loaded or measured, by file.
template <class V>
struct loaded_files {
  std::vector<std::pair<std::string, V>> entries;
  V* find(const std::string& path) {
    for (auto& [p, v] : entries)
      if (p == path) return &v;
    return nullptr;
  }
  void put(const std::string& path, V v) {
    if (V* old = find(path)) *old = std::move(v);
    else entries.emplace_back(path, std::move(v));
  }
};
// One lock for every loaded_files of this process (models and choices).
std::mutex& loaded_models_mutex();

// The CPU this runs on (a cached choice is only trusted on the same one).
std::string cpu_model();

}  // namespace detail
}  // namespace ringtree

#if RINGTREE_DEFINES
#include <ringtree/tuning/cache_files-inl.hpp>
#endif

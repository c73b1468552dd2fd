// libFuzzer: everything ringtree parses from text a user (or a script)
// wrote: ringtree-perf's command line, the environment variables
// (RINGTREE_TIMEOUT, RINGTREE_CHECK, RINGTREE_ALGO), algorithm names, the
// cost model file. Each must accept or raise ringtree::error; nothing else.
// The input is split at NUL bytes: the first piece picks the target.
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz_check.hpp"

#include <ringtree/tuning/calibration.hpp>
#include <ringtree/communicator.hpp>
#include <ringtree/core/config.hpp>

#include "perf_args.hpp"

using namespace ringtree;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::vector<std::string> parts(1);
  for (std::size_t i = 1; i < size; ++i) {
    if (data[i] == 0) parts.emplace_back();
    else parts.back() += static_cast<char>(data[i]);
  }
  try {
    switch (data[0] % 5) {
      case 0: {  // ringtree-perf's flags
        std::vector<const char*> argv = {"ringtree-perf"};
        for (auto& p : parts) argv.push_back(p.c_str());
        const auto o = perf::parse(static_cast<int>(argv.size()), argv.data());
        if (!o.help && (o.min_bytes > o.max_bytes || o.collectives.empty() || o.algos.empty() || !(o.factor > 1)))
          std::abort();  // parse() promised a runnable sweep
        break;
      }
      case 1:
        ::setenv("RINGTREE_TIMEOUT", parts[0].c_str(), 1);
        FUZZ_CHECK(!(!(detail::default_timeout().count() > 0)));
        break;
      case 2:
        ::setenv("RINGTREE_CHECK", parts[0].c_str(), 1);
        (void)config::flag("RINGTREE_CHECK");
        break;
      case 3: {
        ::setenv("RINGTREE_ALGO", parts[0].c_str(), 1);
        const auto spec = config::from_env().algo;
        const auto a = detail::env_algorithms(spec);
        if (spec.find(':') == std::string::npos)  // one name: only exact names, for every collective alike
          for (const auto& x : a) FUZZ_CHECK(!(x && to_string(*x) != parts[0]));
        for (std::size_t i = 0; i < a.size(); ++i)  // per collective: only algorithms that collective has
          FUZZ_CHECK(!(spec.find(':') != std::string::npos && a[i] && !detail::offers(all_collectives[i], *a[i])));
        if (spec.find(':') != std::string::npos) {  // the word the ranks compare says the same choices back
          const std::string shown = detail::show_env_algorithms(detail::env_algorithms_word(a));
          FUZZ_CHECK(!(detail::env_algorithms(shown == "none" ? std::string() : shown) != a));
        }
        break;
      }
      case 4: {
        std::string text;
        for (auto& p : parts) text += p + "\n";
        std::istringstream in(text);
        const cost_model m = detail::parse_model(in, "fuzz.txt", 0);
        FUZZ_CHECK(!(!(m.alpha >= 0 && m.beta >= 0 && m.gamma >= 0 && m.knee >= 0 && m.alpha_above >= 0)));
        break;
      }
    }
  } catch (const error&) {
    // refused with a reason: fine
  }
  return 0;
}

#pragma once
// model_file.hpp's cold part (core/compiled.hpp): the bodies of its functions,
// compiled where RINGTREE_DEFINES is 1.
#include <ringtree/tuning/model_file.hpp>

namespace ringtree::detail {

RINGTREE_FUNC std::string model_path(const std::string& transport, int ranks, const config& c) {
  if (!c.model_file.empty()) return c.model_file;
  return cat(c.cache_dir, "/model-", transport, "-", ranks, "ranks.txt");
}

RINGTREE_FUNC cost_model parse_model(std::istream& in, const std::string& path, int rank) {
  cost_model m;
  m.source = path;
  bool have[3] = {false, false, false};
  std::string line;
  for (int no = 1; std::getline(in, line); ++no) {
    if (line.size() > max_model_line)
      throw error("cost model", rank, cat(path, ":", no, ": line of ", line.size(), " characters (at most ", max_model_line, ")"));
    line = line.substr(0, line.find('#'));
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::istringstream ls(line);
    std::string key, eq, rest;
    double v = 0;
    if (!(ls >> key >> eq >> v) || eq != "=" || (ls >> rest) || !(v >= 0) || v > 1e9)
      throw error("cost model", rank, cat(path, ":", no, ": expected 'name = number >= 0', got '", line, "'"));
    if (key == "alpha_us") m.alpha = v * 1e-6, have[0] = true;
    else if (key == "beta_ns_per_byte") m.beta = v * 1e-9, have[1] = true;
    else if (key == "gamma_ns_per_byte") m.gamma = v * 1e-9, have[2] = true;
    else if (key == "knee_bytes") m.knee = v;
    else if (key == "alpha_above_knee_us") m.alpha_above = v * 1e-6;
    else if (key == "alpha_net_us") m.alpha_net = v * 1e-6;
    else if (key == "beta_net_ns_per_byte") m.beta_net = v * 1e-9;
    else throw error("cost model", rank, cat(path, ":", no, ": unknown name '", key,
                                             "' (alpha_us, beta_ns_per_byte, gamma_ns_per_byte, knee_bytes, alpha_above_knee_us, ",
                                             "alpha_net_us, beta_net_ns_per_byte)"));
  }
  if (!(have[0] && have[1] && have[2]))
    throw error("cost model", rank, cat(path, ": needs alpha_us, beta_ns_per_byte and gamma_ns_per_byte"));
  return m;
}

RINGTREE_FUNC std::optional<cost_model> read_model(const std::string& path, int rank) {
  const auto text = read_text_file(path, "cost model", "model", rank);
  if (!text) return std::nullopt;
  std::istringstream in(*text);
  return parse_model(in, path, rank);
}

RINGTREE_FUNC void write_model(const std::string& path, const cost_model& m, const std::string& transport, int ranks) {
  write_text_file(path, cat("# ringtree cost model: transport ", transport, ", ", ranks, " ranks, measured ", measured_stamp(),
                            "\n# a call's time = alpha * steps + beta * bytes moved + gamma * bytes reduced (see docs/algorithms.md)",
                            "\n# edit to override; delete (or RINGTREE_CALIBRATE=1) to measure again\n",
                            "alpha_us = ", m.alpha * 1e6, "\nbeta_ns_per_byte = ", m.beta * 1e9, "\ngamma_ns_per_byte = ", m.gamma * 1e9,
                            "\n# steps whose messages are larger than knee_bytes cost alpha_above_knee_us more (0: no knee)",
                            "\nknee_bytes = ", m.knee, "\nalpha_above_knee_us = ", m.alpha_above * 1e6, "\n",
                            m.alpha_net < 0 ? std::string() :
                            cat("# between hosts: per step, and per byte over one host's link\nalpha_net_us = ", m.alpha_net * 1e6,
                                "\nbeta_net_ns_per_byte = ", std::max(0.0, m.beta_net) * 1e9, "\n")));
}

RINGTREE_FUNC loaded_files<cost_model>& loaded_models() {
  static loaded_files<cost_model> models;
  return models;
}

}  // namespace ringtree::detail

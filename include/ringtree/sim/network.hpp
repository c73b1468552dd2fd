#pragma once
// The simulator's network (sim/world.hpp runs the ranks on it), with
// hosts of L ranks:
//   within a host   a message occupies the sender's send port and the
//                   receiver's receive port (each rank's CPU, full duplex)
//                   for m * beta, and has arrived alpha after that (alpha
//                   is latency: messages to several peers overlap it);
//   between hosts   it occupies the sending host's NIC out and the
//                   receiving host's NIC in for m * beta_net (each direction
//                   carries one message at a time: contention serialises),
//                   and arrives alpha_net after it has crossed;
//   reductions      cost gamma per byte of the rank's clock, copies beta;
//   oversubscription multiplies what the CPU does (alpha, beta, gamma);
//   a message above the knee costs alpha_above more (a protocol switch).
// A message takes its ports when they are free, first come first served
// in virtual time. The constants are the cost model's (tuning/cost_model.hpp,
// RINGTREE_MODEL_FILE), so the closed-form prediction and the simulation
// differ only by what the closed form leaves out: contention, waiting on
// late partners, pipelining and the real schedule.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <ringtree/tuning/cost_model.hpp>

namespace ringtree::sim {

// Virtual time, in picoseconds (2^63 ps: 106 days): integers, so that a
// run's times are the same bit for bit on every machine.
using picoseconds = std::int64_t;
inline double seconds(picoseconds t) noexcept { return static_cast<double>(t) * 1e-12; }

// The network's constants, in seconds.
struct network {
  double alpha = 5e-6, beta = 1e-10;          // within a host: per message, per byte
  double alpha_net = -1, beta_net = -1;        // between hosts (negative: as within)
  double gamma = 1e-10;                        // per byte reduced
  double oversubscription = 1;                 // ranks per core: CPU costs x this
  double knee = 0, alpha_above = 0;            // a message above knee bytes (0: none) costs alpha_above more (a protocol switch)
  bool contention = true;                      // false: ports and links never busy (what the schedule alone costs)
  // The cost model's constants (the same file ringtree calibrates).
  static network of(const cost_model& m) { return {m.alpha, m.beta, m.alpha_net, m.beta_net, m.gamma, 1, m.knee, m.alpha_above, true}; }
  // (with the CPU's costs times the oversubscription, as links charges them)
  cost_model model() const {
    cost_model m;
    const double cpu = std::max(1.0, oversubscription);
    m.alpha = alpha * cpu, m.beta = beta * cpu, m.gamma = gamma * cpu;
    m.alpha_net = alpha_net < 0 ? alpha : alpha_net, m.beta_net = beta_net < 0 ? beta : beta_net;
    m.knee = knee, m.alpha_above = alpha_above;
    m.source = "simulated network";
    return m;
  }
};

// The network's state during a run: when each port and link is free.
class links {
 public:
  explicit links(const network& n) : contention_(n.contention), knee_(n.knee) {
    const double cpu = std::max(1.0, n.oversubscription);
    alpha_ = std::llround(n.alpha * cpu * 1e12);
    beta_ = n.beta * cpu * 1e12;
    gamma_ = n.gamma * cpu * 1e12;
    alpha_net_ = std::llround((n.alpha_net < 0 ? n.alpha : n.alpha_net) * 1e12);
    beta_net_ = (n.beta_net < 0 ? n.beta : n.beta_net) * 1e12;
    alpha_above_ = std::llround(n.alpha_above * 1e12);
  }
  // Every port and link free, for `ranks` ranks on `hosts` hosts.
  void reset(int ranks, int hosts) {
    send_port_.assign(static_cast<std::size_t>(ranks), 0);
    recv_port_.assign(static_cast<std::size_t>(ranks), 0);
    nic_out_.assign(static_cast<std::size_t>(hosts), 0);
    nic_in_.assign(static_cast<std::size_t>(hosts), 0);
  }
  // A message of `bytes` from rank a (on host ha) to rank b (on hb), both
  // ends posted at `now`: when the sender and the receiver are done.
  struct delivery {
    picoseconds sent, received;
  };
  delivery carry(int a, int ha, int b, int hb, std::size_t bytes, picoseconds now) {
    const picoseconds above = knee_ > 0 && static_cast<double>(bytes) > knee_ ? alpha_above_ : 0;
    if (ha == hb) {
      const picoseconds t0 = contention_ ? std::max({now, send_port_[a], recv_port_[b]}) : now;
      const picoseconds t1 = t0 + per_byte(beta_, bytes);
      send_port_[a] = recv_port_[b] = t1;
      return {t1 + alpha_ + above, t1 + alpha_ + above};
    }
    const picoseconds t0 = contention_ ? std::max({now, nic_out_[ha], nic_in_[hb]}) : now;
    const picoseconds t1 = t0 + per_byte(beta_net_, bytes);
    nic_out_[ha] = nic_in_[hb] = t1;
    return {t1, t1 + alpha_net_ + above};
  }
  // What a rank's CPU takes to reduce or to copy `bytes`.
  picoseconds reduce_time(std::size_t bytes) const noexcept { return per_byte(gamma_, bytes); }
  picoseconds copy_time(std::size_t bytes) const noexcept { return per_byte(beta_, bytes); }

 private:
  static picoseconds per_byte(double ps_per_byte, std::size_t bytes) noexcept {
    return std::llround(ps_per_byte * static_cast<double>(bytes));
  }
  bool contention_;
  double knee_;
  picoseconds alpha_ = 0, alpha_net_ = 0, alpha_above_ = 0;
  double beta_ = 0, gamma_ = 0, beta_net_ = 0;  // ps per byte
  std::vector<picoseconds> send_port_, recv_port_, nic_out_, nic_in_;
};

}  // namespace ringtree::sim

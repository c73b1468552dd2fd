#pragma once
// A pipeline of simple stages (y = a*x + b element-wise, squared-error loss
// at the end) run by run_pipeline, against the same computation done
// sequentially in one process. Shared by the host and MPI suites.
#include <string>
#include <vector>

#include <ringtree/train/pipeline.hpp>

namespace rt_test::pipe {

constexpr int width = 6;

inline float data(int k, int i, int salt) { return float(((k * 7 + i * 3 + salt) % 11) - 5) / 4; }

struct stage {
  int s, m;
  std::vector<float> a, b, da, db;
  std::vector<std::vector<float>> x, y, gy, gx;
  bool last;
  stage(int s_, int stages, int m_) : s(s_), m(m_), a(width), b(width), da(width, 0), db(width, 0),
        x(m_, std::vector<float>(width)), y(x), gy(x), gx(x), last(s_ == stages - 1) {
    for (int i = 0; i < width; ++i) a[i] = 0.5f + 0.1f * (s + i), b[i] = 0.05f * (i - s);
    if (s == 0)
      for (int k = 0; k < m; ++k)
        for (int i = 0; i < width; ++i) x[k][i] = data(k, i, 0);
  }
  std::span<float> input(int k) { return x[k]; }
  std::span<float> output(int k) { return y[k]; }
  std::span<float> grad_output(int k) { return gy[k]; }
  std::span<float> grad_input(int k) { return gx[k]; }
  void forward(int k) {
    for (int i = 0; i < width; ++i) y[k][i] = a[i] * x[k][i] + b[i];
  }
  void backward(int k) {
    if (last)
      for (int i = 0; i < width; ++i) gy[k][i] = y[k][i] - data(k, i, 1);  // d(0.5 (y - t)^2) / dy
    for (int i = 0; i < width; ++i) {
      gx[k][i] = a[i] * gy[k][i];
      da[i] += gy[k][i] * x[k][i];
      db[i] += gy[k][i];
    }
  }
};

// The same stages run one after another in one process.
inline std::vector<stage> sequential(int stages, int m) {
  std::vector<stage> st;
  for (int s = 0; s < stages; ++s) st.emplace_back(s, stages, m);
  for (int k = 0; k < m; ++k) {
    for (int s = 0; s < stages; ++s) {
      if (s > 0) st[s].x[k] = st[s - 1].y[k];
      st[s].forward(k);
    }
    for (int s = stages - 1; s >= 0; --s) {
      if (s + 1 < stages) st[s].gy[k] = st[s + 1].gx[k];
      st[s].backward(k);
    }
  }
  return st;
}

// Runs stage `s` of `stages` (rank s) and compares its gradients with the
// sequential run's: "" or the difference.
template <ringtree::transport T>
std::string check(T& t, ringtree::pipeline_schedule kind, int m) {
  const int stages = t.size(), s = t.rank();
  stage me(s, stages, m);
  ringtree::stage_link<T> link(t, s > 0 ? s - 1 : -1, s + 1 < stages ? s + 1 : -1);
  ringtree::run_pipeline(link, me, kind, s, stages, m);
  const auto ref = sequential(stages, m);
  if (me.da != ref[s].da || me.db != ref[s].db)
    return ringtree::detail::cat("stage ", s, " of ", stages, ", ", m, " micro-batches, ",
                       kind == ringtree::pipeline_schedule::gpipe ? "GPipe" : "1F1B", ": gradients differ from the sequential run");
  return {};
}

}  // namespace rt_test::pipe

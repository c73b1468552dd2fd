#pragma once
// A two-layer perceptron in plain C++ (Linear -> ReLU -> Linear, MSE loss),
// small enough to read in one sitting: the model of the data-parallel and
// pipeline examples. Parameters live in one flat vector so that they can be
// broadcast and their gradients averaged in one call.
#include <algorithm>
#include <cstddef>
#include <random>
#include <span>
#include <vector>

namespace tiny {

struct mlp {
  int in, hidden, out;
  std::vector<float> params, grads;  // [W1 (hidden x in), b1, W2 (out x hidden), b2]

  mlp(int in_, int hidden_, int out_, unsigned seed) : in(in_), hidden(hidden_), out(out_) {
    params.resize(std::size_t(hidden) * in + hidden + std::size_t(out) * hidden + out);
    grads.assign(params.size(), 0.0f);
    std::mt19937 g(seed);
    std::uniform_real_distribution<float> u(-0.3f, 0.3f);
    for (auto& p : params) p = u(g);
  }
  // `flat` (params or grads) cut per parameter tensor, in parameter order:
  // what grad_sync and broadcast_parameters take.
  std::vector<std::span<float>> tensors(std::vector<float>& flat) const {
    const std::size_t w1 = std::size_t(hidden) * in, b1 = hidden, w2 = std::size_t(out) * hidden, b2 = out;
    std::span<float> f(flat);
    return {f.subspan(0, w1), f.subspan(w1, b1), f.subspan(w1 + b1, w2), f.subspan(w1 + b1 + w2, b2)};
  }
  float* w1() { return params.data(); }
  float* b1() { return w1() + std::size_t(hidden) * in; }
  float* w2() { return b1() + hidden; }
  float* b2() { return w2() + std::size_t(out) * hidden; }

  // Adds d(loss)/d(params) for the batch to grads and returns the loss:
  // mean over the batch of the squared error summed over outputs, scaled
  // by `scale` (the share of the global batch this batch represents).
  float accumulate_gradients(std::span<const float> x, std::span<const float> y, int batch, float scale = 1.0f) {
    float loss = 0;
    std::vector<float> h(hidden), a(hidden), o(out), dout(out), dh(hidden);
    float* gw1 = grads.data();
    float* gb1 = gw1 + std::size_t(hidden) * in;
    float* gw2 = gb1 + hidden;
    float* gb2 = gw2 + std::size_t(out) * hidden;
    for (int s = 0; s < batch; ++s) {
      const float* xs = x.data() + std::size_t(s) * in;
      const float* ys = y.data() + std::size_t(s) * out;
      for (int j = 0; j < hidden; ++j) {
        float z = b1()[j];
        for (int i = 0; i < in; ++i) z += w1()[j * in + i] * xs[i];
        h[j] = z;
        a[j] = std::max(z, 0.0f);
      }
      for (int k = 0; k < out; ++k) {
        float z = b2()[k];
        for (int j = 0; j < hidden; ++j) z += w2()[k * hidden + j] * a[j];
        o[k] = z;
        const float d = z - ys[k];
        loss += d * d;
        dout[k] = 2 * d * scale / batch;
      }
      std::fill(dh.begin(), dh.end(), 0.0f);
      for (int k = 0; k < out; ++k) {
        gb2[k] += dout[k];
        for (int j = 0; j < hidden; ++j) {
          gw2[k * hidden + j] += dout[k] * a[j];
          dh[j] += dout[k] * w2()[k * hidden + j];
        }
      }
      for (int j = 0; j < hidden; ++j) {
        const float dz = h[j] > 0 ? dh[j] : 0.0f;
        gb1[j] += dz;
        for (int i = 0; i < in; ++i) gw1[j * in + i] += dz * xs[i];
      }
    }
    return loss / batch;
  }

  void sgd_step(float lr) {
    for (std::size_t i = 0; i < params.size(); ++i) params[i] -= lr * grads[i];
    std::fill(grads.begin(), grads.end(), 0.0f);
  }
};

// A random batch: inputs and targets uniform in [-1, 1].
inline void random_batch(std::mt19937& g, int batch, int in, int out, std::vector<float>& x, std::vector<float>& y) {
  std::uniform_real_distribution<float> u(-1, 1);
  x.resize(std::size_t(batch) * in);
  y.resize(std::size_t(batch) * out);
  for (auto& v : x) v = u(g);
  for (auto& v : y) v = u(g);
}

}  // namespace tiny

namespace tiny {

// A fully connected layer on a batch (rows of `in` features), with its
// backward pass; gradients accumulate until the optimiser step.
struct linear {
  int in, out;
  std::vector<float> w, b, gw, gb;  // w: out x in
  linear(int in_, int out_, unsigned seed) : in(in_), out(out_), w(std::size_t(in_) * out_), b(out_), gw(w.size()), gb(out_) {
    std::mt19937 g(seed);
    std::uniform_real_distribution<float> u(-0.4f, 0.4f);
    for (auto& v : w) v = u(g);
    for (auto& v : b) v = u(g);
  }
  void forward(std::span<const float> x, std::span<float> y, int batch) const {
    for (int s = 0; s < batch; ++s)
      for (int o = 0; o < out; ++o) {
        float z = b[o];
        for (int i = 0; i < in; ++i) z += w[o * in + i] * x[s * in + i];
        y[s * out + o] = z;
      }
  }
  void backward(std::span<const float> x, std::span<const float> gy, std::span<float> gx, int batch) {
    for (int s = 0; s < batch; ++s) {
      for (int i = 0; i < in; ++i) gx[s * in + i] = 0;
      for (int o = 0; o < out; ++o) {
        const float d = gy[s * out + o];
        gb[o] += d;
        for (int i = 0; i < in; ++i) {
          gw[o * in + i] += d * x[s * in + i];
          gx[s * in + i] += d * w[o * in + i];
        }
      }
    }
  }
  void sgd_step(float lr) {
    for (std::size_t i = 0; i < w.size(); ++i) w[i] -= lr * gw[i], gw[i] = 0;
    for (std::size_t i = 0; i < b.size(); ++i) b[i] -= lr * gb[i], gb[i] = 0;
  }
};

inline float leaky(float z) { return z > 0 ? z : 0.01f * z; }
inline float leaky_grad(float z) { return z > 0 ? 1.0f : 0.01f; }

}  // namespace tiny

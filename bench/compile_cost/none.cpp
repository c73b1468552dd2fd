// The program of one.cpp without ringtree: threads and a vector of floats.
#include <cstdio>
#include <thread>
#include <vector>

int main() {
  std::vector<float> grad(1000, 1.0f);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 4; ++r) ranks.emplace_back([&grad, r] { grad[r] += 1.0f; });
  for (auto& t : ranks) t.join();
  std::printf("%g\n", grad[0]);
}

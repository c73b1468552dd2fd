#pragma once
// The double binary tree's cost counts, found by running its schedule on
// paper: the tree all-reduce's row (algorithms/tree.hpp) reads them from
// the shape the cost model makes once per rank count.
#include <algorithm>
#include <vector>

#include <ringtree/algorithms/tree.hpp>

namespace ringtree::tree {

// The double binary tree's costs on n ranks (the table's shape holds them):
// the most halves one rank moves and reduces, and the longest chain of
// dependent messages when each half travels in one chunk or in several.
// For the chain, the ranks' program order is followed as allreduce runs it
// (Lamport clocks, as the traced transport counts): tree by tree, chunk by
// chunk, up the tree from the leaves, then down from the root, where
// leaves post all their chunks at once. With several chunks the chain no
// longer grows: two chunks give its length.
inline void double_tree_shape(shape& s) {
  const int n = s.n;
  if (n < 2) return;
  std::vector<links> l[2];
  std::vector<int> depth[2];
  for (int h = 0; h < 2; ++h)
    for (int r = 0; r < n; ++r) l[h].push_back(binary_tree_shifted(n, r, h));
  for (int h = 0; h < 2; ++h)
    for (int r = 0; r < n; ++r) {
      int d = 0;
      for (int x = r; l[h][x].parent >= 0; x = l[h][x].parent) ++d;
      depth[h].push_back(d);
    }
  auto children = [&](int h, int r) { return int(l[h][r].child[0] >= 0) + int(l[h][r].child[1] >= 0); };
  for (int r = 0; r < n; ++r) {
    int moved = 0, reduced = 0;
    for (int h = 0; h < 2; ++h) moved += children(h, r) + (l[h][r].parent >= 0), reduced += children(h, r);
    s.tree_moved = std::max(s.tree_moved, moved);
    s.tree_reduced = std::max(s.tree_reduced, reduced);
  }
  // Ranks by depth: deepest first for the way up, the root first down.
  std::vector<int> order[2];
  for (int h = 0; h < 2; ++h) {
    for (int r = 0; r < n; ++r) order[h].push_back(r);
    std::stable_sort(order[h].begin(), order[h].end(), [&](int a, int b) { return depth[h][a] > depth[h][b]; });
  }
  for (int chunks : {1, 2}) {
    std::vector<int> clock(n, 0);
    int steps = 0;
    auto early = [&](int h, int r) { return children(h, r) == 0 && l[h][r].parent != l[1 - h][r].parent; };
    for (int h = 0; h < 2; ++h)
      for (int r = 0; r < n; ++r)
        if (early(h, r)) steps = std::max(steps, 1);  // sent at clock 0
    std::vector<std::vector<int>> up_sent(2, std::vector<int>(n, 0));
    for (int j = 0; j < chunks; ++j)
      for (int h = 0; h < 2; ++h)
        for (int r : order[h]) {
          if (early(h, r)) continue;
          for (int c : l[h][r].child)
            if (c >= 0) clock[r] = std::max(clock[r], up_sent[h][c] + 1);
          if (l[h][r].parent >= 0) up_sent[h][r] = clock[r], steps = std::max(steps, clock[r] + 1);
        }
    std::vector<std::vector<int>> down_sent(2, std::vector<int>(n, 0));
    for (int j = 0; j < chunks; ++j)
      for (int h = 0; h < 2; ++h)
        for (auto it = order[h].rbegin(); it != order[h].rend(); ++it) {
          const int r = *it;
          if (early(h, r)) continue;
          if (l[h][r].parent >= 0) clock[r] = std::max(clock[r], down_sent[h][l[h][r].parent] + 1);
          down_sent[h][r] = clock[r];
          if (children(h, r) > 0) steps = std::max(steps, clock[r] + 1);
        }
    (chunks == 1 ? s.tree_steps_one : s.tree_steps_many) = steps;
  }
}

}  // namespace ringtree::tree

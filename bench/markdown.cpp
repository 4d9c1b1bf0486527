// A Markdown table for the suites' own summaries (bench/markdown.h).
#include "bench/markdown.h"

#include <algorithm>

namespace dlb::bench {

void print_markdown(std::ostream& out, const std::vector<std::vector<std::string>>& rows, bool right_align) {
  if (rows.empty()) return;
  std::vector<std::size_t> w(rows[0].size(), 0);
  for (const auto& r : rows)
    for (std::size_t i = 0; i < r.size() && i < w.size(); ++i) w[i] = std::max(w[i], r[i].size());
  for (std::size_t k = 0; k < rows.size(); ++k) {
    out << "|";
    for (std::size_t i = 0; i < rows[k].size() && i < w.size(); ++i) {
      const std::string pad(w[i] - rows[k][i].size(), ' ');
      out << " " << (right_align ? pad + rows[k][i] : rows[k][i] + pad) << " |";
    }
    out << "\n";
    if (k == 0) {
      out << "|";
      for (std::size_t x : w) out << (right_align ? std::string(x + 1, '-') + ":|" : std::string(x + 2, '-') + "|");
      out << "\n";
    }
  }
}

}  // namespace dlb::bench

// Plain-text tables (see tables.h).
#include "harness/tables.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>

namespace dlb::harness {

void print_table(std::ostream& out, const std::vector<std::string>& header,
                 const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> w(header.size(), 0);
  for (std::size_t c = 0; c < header.size(); ++c) w[c] = header[c].size();
  for (const auto& r : rows)
    for (std::size_t c = 0; c < r.size() && c < w.size(); ++c) w[c] = std::max(w[c], r[c].size());
  auto line = [&](const std::vector<std::string>& cells) {
    out << "|";
    for (std::size_t c = 0; c < w.size(); ++c) {
      const std::string& s = c < cells.size() ? cells[c] : std::string();
      out << " " << s << std::string(w[c] - s.size(), ' ') << " |";
    }
    out << "\n";
  };
  line(header);
  out << "|";
  for (std::size_t c = 0; c < w.size(); ++c) out << std::string(w[c] + 2, '-') << "|";
  out << "\n";
  for (const auto& r : rows) line(r);
}

std::string fmt_seconds(double s) {
  char buf[32];
  if (!(s > 0)) return "-";
  if (s < 1e-3) std::snprintf(buf, sizeof buf, "%.1f us", s * 1e6);
  else if (s < 1) std::snprintf(buf, sizeof buf, "%.3f ms", s * 1e3);
  else std::snprintf(buf, sizeof buf, "%.3f s", s);
  return buf;
}

std::string fmt_number(double v, int sig) {
  char buf[32];
  if (!std::isfinite(v)) return "-";
  if (std::fabs(v) >= 1e5) std::snprintf(buf, sizeof buf, "%.0f", v);
  else std::snprintf(buf, sizeof buf, "%.*g", sig, v);
  return buf;
}

}  // namespace dlb::harness

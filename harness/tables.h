// Plain-text tables for stdout (aligned columns, Markdown-compatible pipes).
#pragma once
#include <iosfwd>
#include <string>
#include <vector>

namespace dlb::harness {

void print_table(std::ostream& out, const std::vector<std::string>& header,
                 const std::vector<std::vector<std::string>>& rows);

std::string fmt_seconds(double s);   // "812 us", "3.41 ms", "1.20 s"
std::string fmt_number(double v, int sig = 4);

}  // namespace dlb::harness

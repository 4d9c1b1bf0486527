// A Markdown table for the suites' own summaries (printed after a run): rows[0] is the header.
#pragma once
#include <ostream>
#include <string>
#include <vector>

namespace dlb::bench {

// Columns padded to their widest cell; right_align pads on the left and marks the columns "---:"
// (numbers), otherwise cells are left-aligned.
void print_markdown(std::ostream& out, const std::vector<std::vector<std::string>>& rows, bool right_align = false);

}  // namespace dlb::bench

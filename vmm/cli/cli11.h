// CLI11, included with the one warning it trips under GCC 12.
#pragma once

// At -O2, GCC 12 reports a false "potential null pointer dereference" inside
// std::string moves that CLI11's inline code instantiates (CLI::detail::split).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnull-dereference"
#include <CLI/CLI.hpp>
#pragma GCC diagnostic pop

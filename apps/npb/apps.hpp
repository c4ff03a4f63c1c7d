// apps.hpp — the npb-cg and npb-mg proxy applications as Simulations (apps/common/app.hpp),
// for their main()s and for in-process runs (apps/experiments).
#pragma once

#include <memory>

#include "apps/common/app.hpp"

namespace cairn::apps {

std::unique_ptr<Simulation> make_npb_cg();  // cg_app.cpp
std::unique_ptr<Simulation> make_npb_mg();  // mg_app.cpp

}  // namespace cairn::apps

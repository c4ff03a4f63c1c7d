// registry.cpp — workloads known by name (`cairn crashsim run --workload NAME`,
// replay of keys).
#include <deque>
#include <mutex>

#include "tests/crashsim/workloads/workloads.hpp"

namespace cairn::testing::crashsim {
namespace {

std::mutex& registry_mutex() {
  static std::mutex mu;
  return mu;
}

// A deque: registering never moves the workloads already handed out.
std::deque<Workload>& registry() {
  static std::deque<Workload> all = [] {
    std::deque<Workload> d;
    for (auto& w : builtin::ref_array_workloads()) d.push_back(std::move(w));
    for (auto& w : builtin::pool_publish_workloads()) d.push_back(std::move(w));
    for (auto& w : builtin::strategy_workloads()) d.push_back(std::move(w));
    for (auto& w : builtin::stream_workloads()) d.push_back(std::move(w));
    for (auto& w : builtin::dist_slot_workloads()) d.push_back(std::move(w));
    for (auto& w : builtin::octree_workloads()) d.push_back(std::move(w));
    for (auto& w : builtin::undo_log_workloads()) d.push_back(std::move(w));
    return d;
  }();
  return all;
}

}  // namespace

std::vector<const Workload*> workloads() {
  std::lock_guard lk(registry_mutex());
  std::vector<const Workload*> out;
  for (const auto& w : registry()) out.push_back(&w);
  return out;
}

const Workload* find_workload(const std::string& name) {
  std::lock_guard lk(registry_mutex());
  for (const auto& w : registry())
    if (w.name == name) return &w;
  return nullptr;
}

void register_workload(Workload workload) {
  std::lock_guard lk(registry_mutex());
  for (auto& w : registry())
    if (w.name == workload.name) {
      w = std::move(workload);
      return;
    }
  registry().push_back(std::move(workload));
}

}  // namespace cairn::testing::crashsim

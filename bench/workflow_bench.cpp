// workflow_bench.cpp — `cairn bench workflow` (see workflow_bench.hpp).
#include "bench/workflow_bench.hpp"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "bench/bench_util.hpp"

namespace cairn::bench {

namespace wf = apps::workflow;

Result<WorkflowReport> run_workflow_bench(const WorkflowBenchOptions& o, std::ostream* progress) {
  WorkflowReport rep;
  rep.options = o;
  rep.machine = cpu_model() + ", load " + fmt("%.2f", load_average()) + ", " + utc_now();
  for (const auto& c : o.couplings) rep.rows.push_back({c, {}, 0, 0, 0, 0, 0, 0});
  for (int r = 0; r < o.repeats; ++r) {
    for (WorkflowRow& row : rep.rows) {
      wf::Config c;
      c.coupling = row.coupling;
      c.cycles = o.cycles;
      c.params.parts = o.parts;
      c.params.level_min = o.level_min;
      c.params.level_max = o.level_max;
      c.params.sweeps = o.sweeps;
      c.bin_dir = o.bin_dir;
      if (!o.tmpfs_dir.empty() && (row.coupling == "file-tmpfs" || row.coupling == "pmem"))
        c.dir = o.tmpfs_dir + "/cairn-workflow-bench." + std::to_string(::getpid()) + "." + row.coupling;
      auto run = wf::run_workflow(c);
      if (!c.dir.empty()) {
        std::error_code ec;
        std::filesystem::remove_all(c.dir, ec);
      }
      if (!run.ok()) return make_error(run.error().code, row.coupling + ": " + run.error().message);
      const wf::Report& x = run.value();
      if (progress != nullptr)
        *progress << "workflow " << row.coupling << " run " << (r + 1) << "/" << o.repeats << ": "
                  << fmt("%.3f", x.total_s) << " s, transfers " << fmt("%.3f", x.transfer_s) << " s\n";
      if (r == 0 && &row == &rep.rows.front()) rep.checksum = x.checksum;
      if (x.checksum != rep.checksum || !x.mesh_error.empty()) rep.checksums_equal = false;
      row.runs.push_back(x);
    }
  }
  for (WorkflowRow& row : rep.rows) {
    std::vector<double> total, transfer, compute, launch;
    for (const auto& x : row.runs) {
      total.push_back(x.total_s), transfer.push_back(x.transfer_s);
      compute.push_back(x.compute_s), launch.push_back(x.launch_s());
    }
    row.total_s = median(total), row.transfer_s = median(transfer);
    row.compute_s = median(compute), row.launch_s = median(launch);
    row.leaves = row.runs.front().leaves;
    for (const auto& [name, t] : row.runs.front().components) row.bytes += t.bytes_out;
  }
  return rep;
}

namespace {
const WorkflowRow* find_row(const WorkflowReport& rep, const std::string& coupling) {
  for (const auto& r : rep.rows)
    if (r.coupling == coupling) return &r;
  return nullptr;
}
std::string ratio(const WorkflowRow* base, double WorkflowRow::*field, const WorkflowRow& row) {
  if (base == nullptr || row.*field <= 0) return "-";
  return fmt("%.2fx", base->*field / (row.*field));
}
}  // namespace

void print_workflow_report(const WorkflowReport& rep, std::ostream& out) {
  const auto& o = rep.options;
  out << "workflow: " << o.cycles << " cycles, " << o.parts << " parts, levels " << o.level_min << "-" << o.level_max
      << ", " << o.sweeps << " sweeps per solve; medians of " << o.repeats << " runs (" << rep.machine << ")\n";
  if (!o.tmpfs_dir.empty()) out << "file-tmpfs files and the pmem pool in " << o.tmpfs_dir << "\n";
  if (!rep.rows.empty())
    out << "final mesh " << rep.rows.front().leaves << " leaves (a stream of the whole mesh: "
        << fmt("%.1f", static_cast<double>(rep.rows.front().leaves * sizeof(wf::Record)) / 1e6)
        << " MB); components write " << fmt("%.1f", static_cast<double>(rep.rows.front().bytes) / 1e6)
        << " MB per run\n";
  if (const unsigned hw = std::thread::hardware_concurrency(); hw > 0 && static_cast<unsigned>(o.parts) > hw)
    out << "OVERSUBSCRIBED: " << o.parts << " solver processes per step on " << hw
        << " hardware threads (the parts of a step share the cores)\n";
  const WorkflowRow* disk = find_row(rep, "file-disk");
  const WorkflowRow* tmpfs = find_row(rep, "file-tmpfs");
  char line[256];
  std::snprintf(line, sizeof line, "%-11s %9s %11s %7s %9s %9s %11s %11s %11s %11s\n", "coupling", "total s",
                "transfer s", "share", "compute s", "launch s", "disk/total", "tmpfs/total", "disk/xfer", "tmpfs/xfer");
  out << line;
  for (const auto& r : rep.rows) {
    std::snprintf(line, sizeof line, "%-11s %9.3f %11.3f %6.1f%% %9.3f %9.3f %11s %11s %11s %11s\n", r.coupling.c_str(),
                  r.total_s, r.transfer_s, r.total_s > 0 ? 100 * r.transfer_s / r.total_s : 0.0, r.compute_s,
                  r.launch_s, ratio(disk, &WorkflowRow::total_s, r).c_str(),
                  ratio(tmpfs, &WorkflowRow::total_s, r).c_str(), ratio(disk, &WorkflowRow::transfer_s, r).c_str(),
                  ratio(tmpfs, &WorkflowRow::transfer_s, r).c_str());
    out << line;
  }
  char sum[40];
  std::snprintf(sum, sizeof sum, "%016llx", static_cast<unsigned long long>(rep.checksum));
  out << (rep.checksums_equal ? "every run: checksum " + std::string(sum) + ", mesh verified\n"
                              : "CHECKSUMS DIFFER between runs or couplings\n");
  out << "share: transfer / total. launch: total - transfer - compute (process start, waits between parts).\n"
         "disk/x, tmpfs/x: how many times longer file-disk (fsync at close) and file-tmpfs take than x.\n";
}

Result<void> write_workflow_json(const WorkflowReport& rep, const std::string& path) {
  const auto& o = rep.options;
  Json rows = Json::array();
  for (const auto& r : rep.rows) {
    Json runs = Json::array();
    for (const auto& run : r.runs) runs.push_back({{"total_s", run.total_s}, {"transfer_s", run.transfer_s}});
    rows.push_back({{"coupling", r.coupling},
                    {"leaves", r.leaves},
                    {"bytes", r.bytes},
                    {"total_s", r.total_s},
                    {"transfer_s", r.transfer_s},
                    {"compute_s", r.compute_s},
                    {"launch_s", r.launch_s},
                    {"runs", runs}});
  }
  const Json doc = {{"machine", rep.machine},
                    {"cycles", o.cycles},
                    {"parts", o.parts},
                    {"level_min", o.level_min},
                    {"level_max", o.level_max},
                    {"sweeps", o.sweeps},
                    {"repeats", o.repeats},
                    {"tmpfs_dir", o.tmpfs_dir},
                    {"checksums_equal", rep.checksums_equal},
                    {"rows", rows}};
  return write_json_file(doc, path);
}

}  // namespace cairn::bench

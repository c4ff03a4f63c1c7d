// cairn/extended/profile.hpp — performance profiles of the emulated NVM device.
//
// The emulated device (make_emulated_device) runs the real libpmem primitives
// on DRAM-backed mappings and then spins on the time-stamp counter to charge
// what the emulated memory would cost beyond DRAM, as seed 000 §5.1 does
// ("a software spin loop that uses the x86 RDTSC instruction ... spins until
// the counter reaches the intended delay"). A Profile says how much:
//
//   write_ns     extra time per cache line written back by flush(), and per
//                line of a small copy that goes through the cache
//   write_overlap  lines of one flush whose write-backs overlap on a thread
//                (default 1: each line waits for the one before, as with
//                clflush). clwb and clflushopt are ordered only by the next
//                fence, so a core keeps several write-backs in flight: a
//                flush of N lines costs ceil(N / write_overlap) * write_ns,
//                and a single line still costs write_ns
//   drain_ns     extra time per drain() (the fence that waits for flushes)
//   write_bw     bytes/s the device accepts for flushed lines plus
//                non-temporal stores, shared by all threads (token bucket)
//   read_ns      extra time per cache line of a random read (read_charge)
//   read_seq_ns  extra time once per sequential read stream (read_charge);
//                after the first line a stream is bandwidth bound
//   read_bw      bytes/s for reads charged with read_charge
//
// All latencies are the *extra* over DRAM, because the DRAM part is already
// paid by running on DRAM. Bandwidths are absolute; 0 means "not capped".
//
// Named profiles (profile_names() lists them):
//   dram          no delay: the emulated device is the real one
//   pcm-2017      seed 000 Table 2: PCM read 100 ns, write 150 ns vs DRAM 60 ns
//   optane-dcpmm  Intel Optane DC PMM, one DIMM (Izraelevitz et al. 2019)
//   quartz-1/8    1/8 of this machine's DRAM copy bandwidth (seed 004 §3)
//   quartz-1/32   1/32 of it
//   cxl-expander  a CXL type-3 memory expander: about twice DRAM latency
//
// The numeric form is comma-separated key=value pairs, optionally after a
// profile name whose values they override:
//   "write_ns=90,read_ns=40,write_gbps=2.3,read_gbps=6.6,drain_ns=0"
//   "optane-dcpmm,write_gbps=1"
//   "write_ns=150,read_ns=100,dram_ns=60"   (dram_ns: the latencies given in
//                                             this spec are absolute device
//                                             latencies; dram_ns is taken off)
// Keys: read_ns read_seq_ns write_ns drain_ns dram_ns (nanoseconds, 0..1e6),
// write_gbps read_gbps (GB/s = 1e9 bytes/s; 0 = uncapped, else 0.001..10000),
// write_overlap (a whole number of lines, 1..1024).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cairn/error.hpp"
#include "cairn/extended/device.hpp"

namespace cairn::devices {

struct Profile {
  std::string name;  // the named profile, or "custom" / "NAME+custom"
  double read_ns = 0;
  double read_seq_ns = 0;
  double write_ns = 0;
  double drain_ns = 0;
  double write_overlap = 1;  // lines; a whole number >= 1
  double write_bw = 0;       // bytes per second, 0 = uncapped
  double read_bw = 0;        // bytes per second, 0 = uncapped
  std::string source;        // where the numbers come from (for `cairn device profiles`)

  // False for a profile that charges nothing (dram): the emulated device then
  // hands out the real device's primitives unchanged.
  bool injects_delay() const {
    return read_ns > 0 || read_seq_ns > 0 || write_ns > 0 || drain_ns > 0 || write_bw > 0 || read_bw > 0;
  }
  // One line: "write 94 ns/line, write 2.30 GB/s, ...".
  std::string describe() const;
};

// The names parse_profile() accepts on their own.
std::vector<std::string> profile_names();

// A profile from a name, a name followed by overrides, or numbers alone.
// Every malformed spec gives Errc::invalid_argument naming the bad part and
// listing what is valid.
Result<Profile> parse_profile(const std::string& spec);

// This machine's DRAM copy bandwidth in bytes/s (memcpy between two buffers
// larger than the last-level cache; best of a few passes). Measured on first
// use and cached for the life of the process; the quartz profiles use it.
double measured_dram_copy_bandwidth();

// The emulated device for an already parsed profile (make_emulated_device
// in device.hpp takes the spec text).
std::unique_ptr<Device> make_emulated_device(const Profile& profile);

}  // namespace cairn::devices

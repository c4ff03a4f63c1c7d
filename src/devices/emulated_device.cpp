// emulated_device.cpp — placeholder until the emulated device lands.
#include "cairn/device.hpp"

namespace cairn::devices {
Result<std::unique_ptr<Device>> make_emulated_device(const std::string& spec) {
  return make_error(Errc::unsupported, "emulated device '" + spec + "' not built yet");
}
}  // namespace cairn::devices

// ============================================================================
// tests/test_support.cc — shared helpers for the GoogleTest suites.
// ============================================================================
#include "test_support.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <sys/wait.h>
#include <unistd.h>

namespace loka::testing {

std::filesystem::path source_dir() { return LOKA_SOURCE_DIR; }
std::filesystem::path tools_dir() { return LOKA_TOOLS_DIR; }

std::filesystem::path make_temp_dir(const std::string& prefix) {
  static std::atomic<int> counter{0};
  const auto dir = std::filesystem::temp_directory_path() /
                   (prefix + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::vector<std::string> zoo_model_dirs(bool with_variants) {
  namespace fs = std::filesystem;
  std::vector<std::string> models;
  const fs::path root = source_dir() / "models" / "zoo";
  std::vector<fs::path> folders = {root};
  if (with_variants) folders.push_back(root / "exports");
  std::error_code error;
  for (const fs::path& dir : folders)
    for (const auto& entry : fs::directory_iterator(dir, error))
      if (fs::exists(entry.path() / "model.onnx")) models.push_back(fs::relative(entry.path(), root).string());
  std::sort(models.begin(), models.end());
  return models;
}

std::string zoo_test_name(const std::string& folder) {
  std::string name = folder;
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer{};
  size_t read = 0;
  while ((read = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.output.append(buffer.data(), read);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

Tensor random_tensor(std::mt19937& rng, const Shape& shape, float low, float high) {
  std::uniform_real_distribution<float> dist(low, high);
  Tensor tensor = Tensor::zeros(DType::kFloat32, shape);
  for (float& v : tensor.values<float>()) v = dist(rng);
  return tensor;
}

float max_abs_difference(const Tensor& a, const Tensor& b) {
  const auto av = a.to_floats();
  const auto bv = b.to_floats();
  float worst = 0.0f;
  for (size_t i = 0; i < av.size() && i < bv.size(); ++i) {
    const float d = std::fabs(av[i] - bv[i]);
    if (std::isnan(d)) return INFINITY;
    worst = std::max(worst, d);
  }
  return worst;
}

void expect_one_line_error(const Status& status, const std::vector<std::string>& needles) {
  ASSERT_FALSE(status.is_ok()) << "expected an error mentioning " << (needles.empty() ? "" : needles[0]);
  const std::string message = status.message();
  EXPECT_FALSE(message.empty());
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  for (const std::string& needle : needles)
    EXPECT_NE(message.find(needle), std::string::npos) << "'" << needle << "' not in: " << message;
}

std::string device_name(const ::testing::TestParamInfo<Device>& info) {
  return info.param == Device::kCuda ? "Cuda" : "Cpu";
}

}  // namespace loka::testing

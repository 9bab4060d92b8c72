// A launched process's config: the launcher's world is the job's workers,
// whatever parallel.workers (the count `meshtrain run` starts) says.
#include "meshtrain/cli/launched_job_config.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "meshtrain/core/error.hpp"

namespace meshtrain::cli {
namespace {

class LaunchedJobConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A file of 2 workers that tensor 2 x pipeline 2 ways do not divide.
    std::ofstream(path_) << "[model]\nkind = \"gpt\"\nn_layer = 2\nn_embd = 32\nn_head = 2\nblock_size = 16\n"
                            "[data]\nkind = \"text\"\npath = \"x.txt\"\n"
                            "[parallel]\ndata = \"allreduce\"\nworkers = 2\nmicro_batches = 2\n";
    for (const char* name : {"RANK", "WORLD_SIZE", "CLUSTER_SPEC", "TF_CONFIG", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"})
      unsetenv(name);
  }
  void TearDown() override {
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    std::filesystem::remove(path_);
  }

  const std::vector<std::string> layout_{"--parallel.tensor=2", "--parallel.pipeline=2"};
  const std::string path_ = (std::filesystem::temp_directory_path() /
                             ("meshtrain-launched-config-" + std::to_string(::getpid()) + ".toml")).string();
};

TEST_F(LaunchedJobConfigTest, WithoutALauncherTheFileAndOverridesDecide) {
  EXPECT_THROW(load_launched_job_config(path_, layout_), ConfigError);
  EXPECT_EQ(load_launched_job_config(path_, {"--parallel.workers=8", layout_[0], layout_[1]}).parallel.workers, 8);
}

TEST_F(LaunchedJobConfigTest, UnderALauncherTheWorldDecides) {
  setenv("RANK", "3", 1);
  setenv("WORLD_SIZE", "8", 1);
  const JobConfig c = load_launched_job_config(path_, layout_);  // the mesh checks 8 workers against 2 x 2
  EXPECT_EQ(c.parallel.tensor, 2);
  EXPECT_EQ(c.parallel.pipeline, 2);
  EXPECT_EQ(c.parallel.workers, 1);
  // Other checks stand.
  EXPECT_THROW(load_launched_job_config(path_, {"--parallel.tensor=4"}), ConfigError);  // n_head 2
}

}  // namespace
}  // namespace meshtrain::cli

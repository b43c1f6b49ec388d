// StepRunner's lead and follow (step_runner.h): the step plan of a server's rank 0,
// broadcast to the other ranks, which run the same cache, compiles and steps, so that every
// collective inside a step meets its peers.
#include <exception>
#include <string>

#include "core/error.h"
#include "generation/step_runner.h"

namespace shardlm::generation {

namespace {

// The phases a plan names, by their index here.
constexpr const char* plan_phases[] = {"decode", "prefill"};

int32_t phase_code(const std::string& phase) {
  for (int32_t i = 0; i < 2; ++i)
    if (phase == plan_phases[i]) return i;
  fail("a step plan names the unknown phase '", phase, "'");
}

}  // namespace

void StepRunner::lead() {
  SHARDLM_CHECK(model_.tp_rank() == 0, "only rank 0 leads the step plan, not rank ", model_.tp_rank());
  plan_ = Tensor::zeros({7}, DType::i32);
  leading_ = model_.tp_size() > 1;
}

void StepRunner::send_plan(PlanCommand command, const graph::CompileKey& key) {
  int32_t* plan = plan_.mutable_data<int32_t>();
  plan[0] = static_cast<int32_t>(command);
  if (command == PlanCommand::cache) {
    plan[1] = static_cast<int32_t>(key.slots);
    plan[2] = static_cast<int32_t>(key.max_cache_len);
  } else if (command != PlanCommand::stop) {
    plan[1] = phase_code(key.phase);
    plan[2] = static_cast<int32_t>(key.batch);
    plan[3] = static_cast<int32_t>(key.tokens_per_step);
    plan[4] = static_cast<int32_t>(key.logit_rows);
    plan[5] = static_cast<int32_t>(key.candidates);
    plan[6] = execution_.compile ? 1 : 0;
  }
  // The follower posts a nonblocking broadcast, and MPI matches those only with their kind.
  model_.process_group().broadcast_waiting(plan_, 0);
}

void StepRunner::release_followers() {
  if (!leading_) return;
  send_plan(PlanCommand::stop, graph::CompileKey());
  leading_ = false;
}

void StepRunner::follow() {
  parallel::ProcessGroup& group = model_.process_group();
  SHARDLM_CHECK(group.rank() != 0, "rank 0 leads the step plan; it does not follow");
  plan_ = Tensor::zeros({7}, DType::i32);
  const int32_t* plan = plan_.data<int32_t>();
  try {
    for (;;) {
      group.broadcast_waiting(plan_, 0);  // idle between requests: no core held
      const auto command = static_cast<PlanCommand>(plan[0]);
      if (command == PlanCommand::stop) return;
      if (command == PlanCommand::cache) {
        prepare_cache(plan[1], plan[2]);
        continue;
      }
      SHARDLM_CHECK((command == PlanCommand::compile || command == PlanCommand::run) && plan[1] >= 0 && plan[1] < 2,
                    "a step plan with the unknown command ", plan[0], " or phase ", plan[1]);
      execution_.compile = plan[6] != 0;
      StepBuffers& step = buffers(plan_phases[plan[1]], plan[2], plan[3], plan[4], plan[5]);
      if (command == PlanCommand::compile) continue;
      for (const Tensor* input : {&step.host_ids, &step.host_positions, &step.host_cache_rows, &step.host_rows})
        group.broadcast(*input, 0);
      run_on_device(step);
    }
  } catch (const std::exception& error) {
    // Rank 0 waits in a collective of this step: only ending the job ends its wait.
    group.abort(str_cat("rank ", group.rank(), " failed following the step plan: ", error.what()));
  }
}

}  // namespace shardlm::generation

// `artel train`: parses the command line into a TrainConfig (flags override a
// --config JSON file, which overrides the model's recipe defaults) and runs
// the trainer. argv, the environment and the terminal are read here, at the
// edge, and nowhere deeper. With no arguments at all, `artel` runs
// this command with its defaults: the main job, data-parallel over the cores.
//
// Who runs what:
//   artel train --nproc N ...        launcher: re-runs this program N times
//                                    (launch/launcher.h) with the same
//                                    arguments minus --nproc, restarts them
//                                    (--max-restarts), then exits as they did;
//                                    --memory-per-worker or --cpus-per-worker
//                                    launches even one worker, as only a
//                                    launched worker gets its own cgroup
//   ARTEL_RANK set (by the launcher)  worker: shm group from the environment
//   mpirun -np N artel train --backend mpi ...   worker: rank and size from MPI
//   otherwise                        one process, no communication
// A worker started again after a failure (ARTEL_RESTART_COUNT > 0) resumes
// from the newest checkpoint, as --resume does.
//
// Note [Fault injection]: ARTEL_TEST_FAULT=kill@R:K (or stop@R:K) makes rank R
// raise SIGKILL (SIGSTOP) on itself right after step K (and its checkpoint),
// on the first attempt only (ARTEL_RESTART_COUNT = 0); a parameter server's
// rank, once every live worker has pushed step K. It exists for the restart
// and timeout tests; a malformed value is an error.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>
#include <iostream>
#include <map>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "artel/cli/command.h"
#include "artel/cli/parse_flags.h"
#include "artel/cli/planned_run.h"
#include "artel/comm/process_group.h"
#include "artel/core/error.h"
#include "artel/kernels/gemm.h"
#include "artel/core/memory_limit.h"
#include "artel/core/regular_file.h"
#include "artel/core/threads.h"
#include "artel/core/trace.h"
#include "artel/launch/launcher.h"
#include "artel/launch/memory_size.h"
#include "artel/launch/worker_env.h"
#include "artel/nn/safetensors.h"
#include "artel/parallel/ps_protocol.h"
#include "artel/train/bundled_data.h"
#include "artel/train/checkpoint_store.h"
#include "artel/train/data_parallel.h"
#include "artel/train/mesh_worker.h"
#include "artel/train/parameter_server.h"
#include "artel/train/trace_gather.h"
#include "artel/train/rank_agreement.h"
#include "artel/train/resume_batch.h"
#include "artel/train/train_config.h"
#include "artel/train/trainer.h"

namespace artel::cli {

namespace {

std::string flag_of(const std::string& key) {
  std::string f = "--" + key;
  for (char& c : f)
    if (c == '_') c = '-';
  return f;
}

// " [default gpt 12, mlp/cnn 128]": the defaults of a key for each model.
// "" for keys whose help already says it (model, data).
std::string defaults_of(const std::string& key) {
  if (key == "model" || key == "data") return "";
  std::vector<std::pair<std::string, std::string>> by_value;  // value -> models
  for (const char* m : {"gpt", "wordlm", "mlp", "cnn"}) {
    nlohmann::json v = train::default_config(m).to_json()[key];
    std::string text = v.is_string() ? (v.get<std::string>().empty() ? "none" : v.get<std::string>()) : v.dump();
    auto it = std::find_if(by_value.begin(), by_value.end(), [&](const auto& p) { return p.first == text; });
    if (it == by_value.end()) by_value.emplace_back(text, m);
    else it->second += std::string("/") + m;
  }
  if (by_value.size() == 1) return " [default " + by_value[0].first + "]";
  std::string s;
  for (const auto& [value, models] : by_value) s += (s.empty() ? " [default " : ", ") + models + " " + value;
  return s + "]";
}

// How the job is run (not what it trains): they are not config keys.
struct JobFlags {
  int nproc = 1;                 // workers to launch; 1 = this process trains
  std::string backend = "shm";   // shm (launched workers) | mpi (mpirun)
  double timeout_s = 300;        // a collective that waits longer fails, naming the missing ranks
  bool resume = false;
  int max_restarts = 0;
  std::string bind_to = "none";  // core: each worker on its own cores when they fit | none
  std::string memory_per_worker;  // SIZE (launch/memory_size.h); "" = no limit
  std::optional<double> cpus_per_worker;  // cores' worth of time per worker (launch/launcher.h); unset = no limit
  bool no_memory_check = false;   // start even when the planner predicts the layout does not fit (planned_run.h)
};

// The main job's global batch (W2's 12 rows) split over as many workers as
// there are cores, among the divisors of 12: one thread each, the same update.
int main_job_workers() {
  int cores = available_cores(), best = 1;
  for (int w = 1; w <= std::min(cores, 12); ++w)
    if (12 % w == 0) best = w;
  return best;
}

// argv minus "--nproc N" / "--nproc=N": what each launched worker runs.
std::vector<std::string> worker_command(int argc, char** argv) {
  std::vector<std::string> cmd = {launch::current_executable(), "train"};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--nproc") ++i;
    else if (a.rfind("--nproc=", 0) != 0) cmd.push_back(a);
  }
  return cmd;
}

// --memory-per-worker in bytes, refused up front when this very program
// (which each worker runs) could not even start in it.
std::optional<int64_t> memory_per_worker(const JobFlags& job) {
  if (job.memory_per_worker.empty()) return std::nullopt;
  int64_t limit = launch::parse_memory_size(job.memory_per_worker);
  check_memory_limit_at_start(limit);
  return limit;
}

int launch_workers(const JobFlags& job, const train::TrainConfig& cfg, std::vector<std::string> command) {
  if (job.backend == "mpi")
    throw Error(job.nproc > 1 ? "--nproc starts shm workers; MPI jobs get their workers from mpirun"
                              : "--memory-per-worker and --cpus-per-worker limit the workers artel starts; MPI jobs "
                                "get theirs from mpirun",
                job.nproc > 1 ? "run `mpirun -np " + std::to_string(job.nproc) +
                                    " artel train --backend mpi ...` without --nproc"
                              : "limit workers through the scheduler (Slurm's --mem-per-cpu, --cpus-per-task) or "
                                "prlimit --as");
  // Refused here, in one line, rather than by every worker.
  if (cfg.precision == "bf16") kernels::check_native_bf16();
  if (!cfg.init.empty()) nn::SafetensorsReader{cfg.init};  // a missing, damaged or non-safetensors --init
  if (job.resume && cfg.ps_servers == 0)  // the data-parallel replicas: the workers over the model's split
    train::check_resumable(cfg, job.nproc / (cfg.tp * cfg.pp));
  launch::LaunchConfig lc;
  lc.command = std::move(command);
  lc.nproc = job.nproc;
  lc.max_restarts = job.max_restarts;
  lc.bind_to_core = job.bind_to == "core";
  if (cfg.threads > 0) lc.threads = static_cast<int>(cfg.threads);
  lc.grace_s = 2.0;  // workers keep nothing to flush: checkpoints are written atomically
  lc.memory_per_worker = memory_per_worker(job);
  lc.cpus_per_worker = job.cpus_per_worker;
  if (cfg.ps_servers > 0) {  // the servers are the last ranks (parallel/ps_protocol.h)
    lc.nproc = job.nproc + static_cast<int>(cfg.ps_servers);
    for (int s = 0; s < cfg.ps_servers; ++s)
      lc.rank_names[job.nproc + s] = "parameter server " + std::to_string(s) + " (rank " + std::to_string(job.nproc + s) + ")";
    if (parallel::parse_staleness(cfg.staleness) != 0) {
      // Not worker 0: it writes the run's outputs, and a job without them is no success.
      for (int w = 1; w < job.nproc; ++w) lc.may_fail.push_back(w);
      lc.may_fail_reason = "the parameter servers drop a worker under --staleness " + cfg.staleness;
    }
  }
  return launch::launch(lc);
}

// Note [Fault injection] (header).
std::function<void(int64_t)> fault_injection(int rank, int restart_count) {
  std::optional<std::string> spec = launch::process_env("ARTEL_TEST_FAULT");
  if (!spec || restart_count > 0) return {};
  int sig = spec->rfind("kill@", 0) == 0 ? SIGKILL : spec->rfind("stop@", 0) == 0 ? SIGSTOP : 0;
  int fault_rank = -1;
  long long step = -1;
  char tail = 0;
  if (sig == 0 || std::sscanf(spec->c_str() + 5, "%d:%lld%c", &fault_rank, &step, &tail) != 2 || step < 1)
    throw Error("ARTEL_TEST_FAULT='" + *spec + "' is malformed", "use kill@RANK:STEP or stop@RANK:STEP");
  if (fault_rank != rank) return {};
  return [sig, step](int64_t k) {
    if (k == step) ::raise(sig);
  };
}

// A rank of a parameter-server job; its error is said while its groups are
// alive (Note [Last words]). A server that fails has threads blocked on
// workers the launcher is about to stop: it leaves at once rather than wait
// for them (it holds nothing to flush).
int run_parameter_server_rank(const train::TrainConfig& cfg, const train::RunOptions& run,
                              std::shared_ptr<comm::ProcessGroup> world) {
  const std::shared_ptr<comm::ProcessGroup> group = world;
  train::ParameterServerJob job(cfg, run, std::move(world));
  try {
    job.run();
  } catch (const std::exception& e) {
    say_error("train", e.what());
    group->end_job_on_failure();
    if (!job.is_server()) return 1;
    std::fflush(stdout);
    std::_Exit(1);
  }
  return 0;
}

// Note [Test slowdown]: ARTEL_TEST_SLOW=RANK:FACTOR makes rank RANK a
// straggler: after each step's forward and backward, before its gradients
// leave, it sleeps (FACTOR − 1) times the wall time they took, so that its
// computation takes FACTOR times as long and its gradients come that much
// later, as a slower machine's would. (A sleep after the step, once its
// gradients were sent, would let the others start the next step meanwhile,
// and hide much of the slowdown.) The time is the wall time, not the CPU
// time over the worker's share of a core: the kernel lets a worker under a
// quota run ahead of its share for a while (runtime left over on each core),
// so CPU time over share overstates what its computation takes. Without
// --cpus-per-worker the cores a sleeping straggler leaves go to the others;
// with it, they stay unused, as on machines of their own.
// ARTEL_TEST_SLOW=turns:FACTOR makes the straggler a transient one that
// moves: step k is slowed on worker (k − 1) mod W only (W: the workers), as
// when background work visits one machine at a time. For repeatable
// straggler experiments (parameter-server consistency); a malformed value is
// an error.
std::function<void(int64_t, double)> slowdown(int rank, int workers) {
  std::optional<std::string> spec = launch::process_env("ARTEL_TEST_SLOW");
  if (!spec) return {};
  int slow_rank = -1;
  double factor = 0;
  char tail = 0;
  const bool turns = spec->rfind("turns:", 0) == 0;
  const int fields = turns ? std::sscanf(spec->c_str() + 6, "%lf%c", &factor, &tail) + 1
                           : std::sscanf(spec->c_str(), "%d:%lf%c", &slow_rank, &factor, &tail);
  if (fields != 2 || (!turns && slow_rank < 0) || !(factor >= 1) || factor > 100)
    throw Error("ARTEL_TEST_SLOW='" + *spec + "' is malformed",
                "use RANK:FACTOR or turns:FACTOR with FACTOR in [1, 100], e.g. 3:2");
  if (turns ? rank >= workers : slow_rank != rank) return {};
  return [factor, turns, rank, workers](int64_t k, double seconds) {
    if (!turns || (k - 1) % workers == rank)
      std::this_thread::sleep_for(std::chrono::duration<double>((factor - 1) * seconds));
  };
}

// Note [Last words]: a worker's error is printed while its groups are still
// alive. Once they go, its peers fail at once ("rank 0 left the group"), and
// the launcher, seeing a peer fail, stops this worker (SIGTERM) — which,
// still unwinding, would never say why it failed. So the worker and its
// group are declared outside the try, and outlive the message. Under mpi no
// peer learns that a rank left: it ends the job after its message
// (ProcessGroup::end_job_on_failure) rather than leave them to their timeout.
int run_worker(const JobFlags& job, train::TrainConfig cfg, train::RunOptions run) {
  std::shared_ptr<comm::ProcessGroup> pg;
  std::optional<train::MeshWorker> mesh;
  std::optional<train::DataParallelWorker> data_parallel;
  try {
    check_memory_limit_at_start();  // a --memory-per-worker too small to start in: say so, not an OOM kill later
    comm::GroupOptions g;
    g.backend = job.backend;
    g.timeout = comm::Duration(static_cast<int64_t>(job.timeout_s * 1000));
    int restarts = 0;
    if (std::optional<launch::WorkerEnv> env = launch::read_worker_env()) {
      g = comm::group_options_from_env(g);
      restarts = env->restart_count;
      if (cfg.threads == 0) cfg.threads = env->num_threads.value_or(1);
    }
    run.resume = run.resume || restarts > 0;
    // A parameter-server job's world only agrees on settings and gathers
    // small reports; its ranks register nothing (parallel/ps_protocol.h's pairs).
    if (cfg.ps_servers > 0) g.registered_bytes = 0;
    pg = comm::init_process_group(g);
    train::check_ranks_agree(*pg, cfg);  // mpirun: each rank parsed its own flags and files
    run.after_step = fault_injection(pg->rank(), restarts);
    run.after_compute = slowdown(pg->rank(), pg->size() - static_cast<int>(cfg.ps_servers));
    parallel::DdpOptions ddp = cfg.ddp_options();
    if (cfg.threads == 0) cfg.threads = std::max(1, available_cores() / pg->size());  // mpirun
    if (cfg.ps_servers > 0) return run_parameter_server_rank(cfg, run, pg);
    if (cfg.model_parallel()) {
      train::check_mesh(cfg, pg->size());  // mpirun: no launcher checked it before
      mesh.emplace(cfg, run, pg, ddp);
      mesh->run();
      return 0;
    }
    data_parallel.emplace(cfg, run, pg, ddp);
    data_parallel->run();
    return 0;
  } catch (const std::exception& e) {
    say_error("train", e.what());  // as main() says it
    if (pg) pg->end_job_on_failure();
    return 1;
  }
}

// One process with micro-batches (no tensor or pipeline split): the mesh of one
// worker, over a group of one.
int run_single_mesh(train::TrainConfig cfg, train::RunOptions run) {
  train::check_mesh(cfg, 1);
  comm::GroupOptions g;
  g.backend = "thread";
  g.job_id = "single-" + std::to_string(::getpid());
  train::MeshWorker worker(std::move(cfg), run, comm::init_process_group(g));
  worker.run();
  return 0;
}

// Every config key becomes a flag taking one value; only flags actually given
// override the config file, so the file's values are never silently replaced
// by CLI11 defaults.
int run_train(int argc, char** argv) {
  CLI::App app{"Train gpt (W2 recipe), mlp (W1) or cnn, on one process, data-parallel over --nproc workers, or split "
               "over a dp x pp x tp mesh (gpt: --tp, --pp, --micro-batches); "
               "metrics, weights, checkpoints and progress go to --out.",
               "artel train"};
  std::string config_path;
  app.add_option("--config", config_path, "JSON file with any of the keys below (flags override it)");
  JobFlags job;
  app.add_option("--nproc", job.nproc, "workers to launch on this machine: data-parallel, or a dp x pp x tp mesh with --pp / --tp [default 1]")
      ->check(CLI::Range(1, 4096));
  app.add_option("--backend", job.backend, "communication: shm (--nproc workers) | mpi (under mpirun) [default shm]")
      ->check(CLI::IsMember({"shm", "mpi"}));
  app.add_option("--timeout", job.timeout_s, "seconds a worker waits for its peers in a collective before failing "
                                             "[default 300]")
      ->check(CLI::Range(0.001, 1e6));
  app.add_flag("--resume", job.resume, "continue from the newest checkpoint in OUT/checkpoints");
  app.add_option("--max-restarts", job.max_restarts, "with --nproc: restart all workers after a failure up to R "
                                                     "times; they resume from the newest checkpoint [default 0]")
      ->check(CLI::Range(0, 1000));
  app.add_option("--bind-to", job.bind_to, "with --nproc: core binds each worker to its own --threads cores when "
                                           "they fit, none leaves them to the scheduler [default none]")
      ->check(CLI::IsMember({"core", "none"}));
  app.add_option("--memory-per-worker", job.memory_per_worker,
                 "SIZE (3G, 512MiB, bytes): each worker runs in its own memory cgroup with this limit and stops "
                 "with an out-of-memory error before going over it [default none]");
  app.add_option("--cpus-per-worker", job.cpus_per_worker,
                 "F (0.5, 2): each worker (and parameter server) runs in its own cpu cgroup that allows F cores' "
                 "worth of time, as on a machine of its own: to emulate a cluster on a few cores [default none]");
  app.add_flag("--no-memory-check", job.no_memory_check,
               "start even when the planner (artel plan) predicts that a worker's memory cannot hold the layout");
  std::map<std::string, std::string> values;
  std::vector<std::pair<std::string, CLI::Option*>> options;
  for (const auto& k : train::config_keys()) {
    CLI::Option* o = app.add_option(flag_of(k.key), values[k.key], k.help + defaults_of(k.key))
                         ->type_name(k.type)
                         ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // a later flag wins
    if (k.type == "BOOL") o->expected(0, 1);  // `--sequence-parallel` alone means true
    options.emplace_back(k.key, o);
  }
  if (!parse_flags(app, argc, argv, "see `artel train --help`")) return 0;

  train::ConfigSources src;
  if (!config_path.empty()) src.json = train::read_config_file(config_path);
  for (const auto& [key, opt] : options)
    if (opt->count() > 0) src.overrides[key] = values[key].empty() && opt->get_type_name() == "BOOL" ? "true" : values[key];
  // `artel train --nproc N` hands its workers their arguments without --nproc;
  // one seen here was given to a worker of `artel launch`, which would ignore it.
  if (comm::launched_as_worker() && job.nproc > 1)
    throw Error(detail::concat("--nproc ", job.nproc, " given to a worker of `artel launch`, which starts the workers"),
                detail::concat("drop --nproc and give the count to the launcher: artel launch -n ", job.nproc));
  const bool main_job = argc == 1 && !comm::launched_as_worker();
  if (main_job && main_job_workers() > 1) {  // the same global batch of 12, split over the cores
    job.nproc = main_job_workers();
    src.overrides["batch_size"] = std::to_string(12 / job.nproc);
  }
  train::TrainConfig cfg = train::resolve_config(src);
  if (cfg.data.empty()) cfg.data = train::default_data_for(cfg.model);
  set_out_of_memory_hint(train::memory_hint_for(cfg));  // this process's errors and, as the launcher, its workers'

  if (cfg.model_parallel() && !comm::launched_as_worker() && job.backend != "mpi")
    train::check_mesh(cfg, job.nproc);  // a bad layout fails here, before any worker starts
  train::check_parameter_server(cfg);
  // A restart resumes from the newest checkpoint in OUT: an earlier run's is refused before any worker starts.
  if (!job.resume && !comm::launched_as_worker() && (cfg.checkpoint_every > 0 || job.max_restarts > 0))
    train::refuse_earlier_checkpoints(cfg.out + "/checkpoints");
  // The timeline is written when the run ends: a path it cannot take is said
  // now, not after the training. Its folder is made, as --out's is (a trace
  // inside --out is named before the run makes --out).
  if (!cfg.trace.empty()) {
    std::error_code ec;  // a folder that cannot be made is said by the check
    std::filesystem::create_directories(std::filesystem::path(cfg.trace).parent_path(), ec);
    if (!comm::launched_as_worker()) check_writable(cfg.trace, "--trace");
  }
  // Before any worker starts: a limit the program itself could not start in
  // is said as that; a layout the planner predicts not to fit is refused
  // with its numbers (planned_run.h), once, by the process that launches.
  if (!comm::launched_as_worker() && job.backend != "mpi") {
    memory_per_worker(job);
    std::optional<WorkerMemory> memory =
        worker_memory(job.memory_per_worker, job.nproc + static_cast<int>(cfg.ps_servers));
    if (memory && !job.no_memory_check) check_predicted_memory(cfg, job.nproc, *memory);
  }
  const bool limited = !job.memory_per_worker.empty() || job.cpus_per_worker.has_value();
  const bool launches = job.nproc > 1 || limited || (cfg.ps_servers > 0 && job.backend != "mpi");
  if (job.max_restarts > 0 && !launches && !comm::launched_as_worker())
    throw Error("--max-restarts restarts the workers that artel train starts, and this run starts none",
                job.backend == "mpi" ? "an MPI job's ranks are restarted by its scheduler: drop --max-restarts"
                                     : "add --nproc N, or drop --max-restarts");
  if (job.bind_to == "core" && !launches && !comm::launched_as_worker())
    throw Error("--bind-to core binds the workers that artel train starts, and this run starts none",
                job.backend == "mpi" ? "an MPI job's ranks are bound by mpirun (--bind-to core): drop it here"
                                     : "add --nproc N, or drop --bind-to");
  if (launches && !comm::launched_as_worker()) {
    std::vector<std::string> command = worker_command(argc, argv);
    if (main_job) command.insert(command.end(), {"--batch-size", src.overrides["batch_size"]});
    return launch_workers(job, cfg, std::move(command));
  }
  train::RunOptions run;
  // OpenMPI hands every rank a pseudo-terminal for stdout, whether mpirun's
  // own output is a terminal, a pipe or a batch job's log: under it a rank
  // cannot tell, so it writes plain lines, which read well in both.
  run.terminal = isatty(STDOUT_FILENO) == 1 && job.backend != "mpi";
  run.resume = job.resume;
  if (comm::launched_as_worker() || job.backend == "mpi") return run_worker(job, cfg, run);
  if (cfg.model_parallel()) return run_single_mesh(cfg, run);
  train::Trainer trainer(cfg, run);
  trace::enable(!cfg.trace.empty());
  trainer.run();
  if (!cfg.trace.empty()) {
    trace::enable(false);
    train::write_run_trace(cfg.trace, nullptr, "rank 0", std::cout);
  }
  return 0;
}

const bool kTrainRegistered = register_command("train", "train a model (no arguments: the main job)", run_train);

}  // namespace

}  // namespace artel::cli

#include "artel/plan/cluster.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "artel/core/error.h"
#include "artel/core/json_file.h"

namespace artel::plan {

Precision parse_precision(const std::string& name) {
  if (name == "fp32") return Precision::fp32;
  if (name == "bf16") return Precision::bf16;
  throw Error("unknown precision '" + name + "'", "use fp32 or bf16");
}

const char* precision_name(Precision p) { return p == Precision::fp32 ? "fp32" : "bf16"; }

namespace {

constexpr const char* kFormat = "docs/PLAN.md";

// `key` of object `j`: a number, or {"value": number, "source": text}.
Sourced sourced(const nlohmann::json& j, const char* key, const std::string& where) {
  ARTEL_CHECK(j.is_object() && j.contains(key), where, ": needs \"", key, "\"",
              " (a number, or {\"value\": number, \"source\": text})");
  const nlohmann::json& v = j[key];
  if (v.is_number()) return {v.get<double>(), ""};
  ARTEL_CHECK(v.is_object() && v.contains("value") && v["value"].is_number(), where, ": \"", key,
              "\" must be a number or {\"value\": number, \"source\": text}");
  check_json_keys(v, {"value", "source"}, where + ": " + key, kFormat);
  return {v["value"].get<double>(), json_string_or(v, "source", "", where + ": " + key)};
}

Link parse_link(const nlohmann::json& j, const char* key, const std::string& where) {
  ARTEL_CHECK(j.contains(key) && j[key].is_object(), where, ": needs an object \"", key,
              "\" with \"alpha\" (s) and \"beta\" (bytes/s)");
  const std::string here = where + ": " + key;
  return {sourced(j[key], "alpha", here), sourced(j[key], "beta", here)};
}

nlohmann::ordered_json sourced_json(const Sourced& s) {
  nlohmann::ordered_json j;
  j["value"] = s.value;
  j["source"] = s.source;
  return j;
}

constexpr int64_t kMaxClusterWorkers = int64_t{1} << 20;

void check_positive(const Sourced& s, const char* what) {
  ARTEL_CHECK(std::isfinite(s.value) && s.value > 0, "cluster: ", what, " must be positive, got ", s.value);
}

}  // namespace

void Cluster::validate() const {
  check_positive(hosts, "hosts");
  check_positive(workers_per_host, "workers_per_host");
  ARTEL_CHECK(hosts.value == std::floor(hosts.value) && workers_per_host.value == std::floor(workers_per_host.value),
              "cluster: hosts and workers_per_host must be whole numbers");
  // Beyond the largest clusters built (about 10^5 accelerators), so that a
  // mistyped size is refused rather than searched or overflowed.
  ARTEL_CHECK(hosts.value * workers_per_host.value <= double(kMaxClusterWorkers), "cluster: hosts (", hosts.value,
              ") x workers_per_host (", workers_per_host.value, ") exceeds ", kMaxClusterWorkers, " workers");
  check_positive(device.peak_fp32, "device.peak_flops.fp32");
  check_positive(device.peak_bf16, "device.peak_flops.bf16");
  check_positive(device.gemm_efficiency, "device.gemm_efficiency");
  ARTEL_CHECK(device.gemm_efficiency.value <= 1, "cluster: device.gemm_efficiency must be <= 1");
  check_positive(device.memory_bytes, "device.memory_bytes");
  check_positive(device.memory_bandwidth, "device.memory_bandwidth");
  ARTEL_CHECK(device.runtime_bytes.value >= 0, "cluster: device.runtime_bytes must be >= 0, got ",
              device.runtime_bytes.value);
  ARTEL_CHECK(device.runtime_bytes_with_peers.value >= 0, "cluster: device.runtime_bytes_with_peers must be >= 0, got ",
              device.runtime_bytes_with_peers.value);
  check_positive(device.memory_efficiency, "device.memory_efficiency");
  ARTEL_CHECK(device.memory_efficiency.value <= 1, "cluster: device.memory_efficiency must be <= 1");
  for (const Link* l : {&intra_host, &inter_host}) {
    ARTEL_CHECK(l->alpha.value >= 0, "cluster: a link's alpha must be >= 0, got ", l->alpha.value);
    check_positive(l->beta, "a link's beta");
  }
  ARTEL_CHECK(cores_per_host.value >= 0 && cores_per_host.value == std::floor(cores_per_host.value),
              "cluster: cores_per_host must be a whole number >= 1 (or absent), got ", cores_per_host.value);
  for (const GemmRate& g : device.gemm_table) {
    ARTEL_CHECK(g.m > 0 && g.n > 0 && g.k > 0 && g.flops_per_s > 0,
                "cluster: every gemm_table entry needs positive m, n, k and flops_per_s");
  }
  for (const AttentionRate& a : device.attention_table) {
    ARTEL_CHECK(a.seq > 0 && a.head_size > 0 && a.forward_s > 0 && a.backward_s > 0,
                "cluster: every attention_table entry needs positive seq, head_size, forward_s and backward_s");
  }
}

Cluster Cluster::with_workers(int64_t workers) const {
  ARTEL_CHECK(workers >= 1, "the job needs at least one worker, got ", workers);
  ARTEL_CHECK(workers <= this->workers(), "the job asks for ", workers, " workers but cluster ", name, " has ",
              this->workers());
  Cluster c = *this;
  if (workers < per_host()) {
    c.workers_per_host.value = static_cast<double>(workers);
    c.hosts.value = 1;
    return c;
  }
  require(workers % per_host() == 0, "use a multiple of workers_per_host", "the job's ", workers,
          " workers do not fill whole hosts of ", per_host(), " workers");
  c.hosts.value = static_cast<double>(workers / per_host());
  return c;
}

double worker_speed(const Cluster& c, int64_t threads) {
  const double cores = c.cores_per_host.value;
  if (cores <= 0) return 1;
  const double share = cores / static_cast<double>(c.per_host());
  const double t = threads > 0 ? static_cast<double>(threads) : std::max(1.0, std::floor(share));
  return std::min(t, share);
}

bool time_sliced(const Cluster& c) {
  return c.cores_per_host.value > 0 && c.cores_per_host.value < static_cast<double>(c.per_host());
}

bool spare_core(const Cluster& c, int64_t threads) {
  const double cores = c.cores_per_host.value;
  if (cores <= 0) return false;
  const double per_host = static_cast<double>(c.per_host());
  const double t = threads > 0 ? static_cast<double>(threads) : std::max(1.0, std::floor(cores / per_host));
  return per_host * t < cores;
}

double streaming_seconds(const Device& device, double bytes) {
  return bytes / (device.memory_bandwidth.value * device.memory_efficiency.value);
}

Cluster with_worker_speed(const Cluster& c, double speed) {
  ARTEL_CHECK(std::isfinite(speed) && speed > 0, "a worker's speed must be positive, got ", speed);
  Cluster s = c;
  s.device.peak_fp32.value *= speed;
  s.device.peak_bf16.value *= speed;
  s.device.memory_bandwidth.value *= speed;
  for (GemmRate& g : s.device.gemm_table) g.flops_per_s *= speed;
  for (AttentionRate& a : s.device.attention_table) a.forward_s /= speed, a.backward_s /= speed;
  return s;
}

std::optional<AttentionSeconds> attention_seconds(const Device& device, Precision precision, double items, double seq,
                                                  double head_size) {
  const bool has_precision = std::any_of(device.attention_table.begin(), device.attention_table.end(),
                                         [&](const AttentionRate& a) { return a.precision == precision; });
  const AttentionRate* nearest = nullptr;
  double best = std::numeric_limits<double>::infinity();
  for (const AttentionRate& a : device.attention_table) {
    if (has_precision && a.precision != precision) continue;
    const double d = std::pow(std::log(seq / a.seq), 2) + std::pow(std::log(head_size / a.head_size), 2);
    if (d < best) best = d, nearest = &a;
  }
  if (!nearest) return std::nullopt;
  const double scale = items * (seq * seq * head_size) /
                       (static_cast<double>(nearest->seq * nearest->seq) * static_cast<double>(nearest->head_size));
  return AttentionSeconds{nearest->forward_s * scale, nearest->backward_s * scale};
}

double achieved_flops(const Device& device, Precision precision) {
  const double peak = precision == Precision::bf16 ? device.peak_bf16.value : device.peak_fp32.value;
  return peak * device.gemm_efficiency.value;
}

double gemm_seconds(const Device& device, Precision precision, double m, double n, double k) {
  const double flops = 2 * m * n * k;
  if (flops <= 0) return 0;
  const GemmRate* nearest = nullptr;
  double best = std::numeric_limits<double>::infinity();
  for (const GemmRate& g : device.gemm_table) {
    if (g.precision != precision) continue;
    const double d = std::pow(std::log(m / g.m), 2) + std::pow(std::log(n / g.n), 2) + std::pow(std::log(k / g.k), 2);
    if (d < best) best = d, nearest = &g;
  }
  if (nearest) return flops / nearest->flops_per_s;
  // Roofline: a product cannot beat the time to read its operands and write
  // its result once (thin products, such as attention's per-head Q·Kᵀ with
  // k = h/a, are bound by memory, not by the multipliers).
  const double element = precision == Precision::bf16 ? 2.0 : 4.0;
  const double bytes = (m * k + k * n + m * n) * element;
  return std::max(flops / achieved_flops(device, precision), streaming_seconds(device, bytes));
}

Cluster parse_cluster(const nlohmann::json& j, const std::string& origin) {
  ARTEL_CHECK(j.is_object(), origin, ": a cluster file holds one JSON object");
  check_json_keys(j, {"name", "description", "hosts", "workers_per_host", "cores_per_host", "device", "links"}, origin,
                  kFormat);
  Cluster c;
  c.name = json_string_or(j, "name", origin, origin);
  json_string_or(j, "description", "", origin);  // prose: read by people only, but a string
  c.hosts = sourced(j, "hosts", origin);
  c.workers_per_host = sourced(j, "workers_per_host", origin);
  if (j.contains("cores_per_host")) c.cores_per_host = sourced(j, "cores_per_host", origin);
  ARTEL_CHECK(j.contains("device") && j["device"].is_object(), origin, ": needs an object \"device\"");
  const nlohmann::json& d = j["device"];
  const std::string dw = origin + ": device";
  check_json_keys(d,
                  {"name", "description", "peak_flops", "gemm_efficiency", "memory_bytes", "runtime_bytes",
                   "runtime_bytes_with_peers", "memory_bandwidth", "memory_efficiency", "gemm_table",
                   "attention_table"},
                  dw, kFormat);
  c.device.name = json_string_or(d, "name", "worker", dw);
  json_string_or(d, "description", "", dw);
  ARTEL_CHECK(d.contains("peak_flops") && d["peak_flops"].is_object(), dw,
              ": needs \"peak_flops\" with \"fp32\" and \"bf16\"");
  c.device.peak_fp32 = sourced(d["peak_flops"], "fp32", dw + ".peak_flops");
  c.device.peak_bf16 = sourced(d["peak_flops"], "bf16", dw + ".peak_flops");
  c.device.gemm_efficiency = sourced(d, "gemm_efficiency", dw);
  c.device.memory_bytes = sourced(d, "memory_bytes", dw);
  if (d.contains("runtime_bytes")) c.device.runtime_bytes = sourced(d, "runtime_bytes", dw);
  if (d.contains("runtime_bytes_with_peers"))
    c.device.runtime_bytes_with_peers = sourced(d, "runtime_bytes_with_peers", dw);
  c.device.memory_bandwidth = sourced(d, "memory_bandwidth", dw);
  c.device.memory_efficiency = sourced(d, "memory_efficiency", dw);
  if (d.contains("gemm_table")) {
    ARTEL_CHECK(d["gemm_table"].is_array(), dw, ": \"gemm_table\" must be an array");
    for (size_t i = 0; i < d["gemm_table"].size(); ++i) {
      const nlohmann::json& g = d["gemm_table"][i];
      const std::string gw = detail::concat(dw, ": gemm_table[", i, "]");
      ARTEL_CHECK(g.is_object(), gw, " must be an object {precision, m, n, k, flops_per_s}");
      check_json_keys(g, {"precision", "m", "n", "k", "flops_per_s", "source"}, gw, kFormat);
      c.device.gemm_table.push_back({parse_precision(json_string_or(g, "precision", "bf16", gw)),
                                     json_integer_or(g, "m", 0, gw), json_integer_or(g, "n", 0, gw),
                                     json_integer_or(g, "k", 0, gw), json_number_or(g, "flops_per_s", 0, gw),
                                     json_string_or(g, "source", "", gw)});
    }
  }
  if (d.contains("attention_table")) {
    ARTEL_CHECK(d["attention_table"].is_array(), dw, ": \"attention_table\" must be an array");
    for (size_t i = 0; i < d["attention_table"].size(); ++i) {
      const nlohmann::json& a = d["attention_table"][i];
      const std::string aw = detail::concat(dw, ": attention_table[", i, "]");
      ARTEL_CHECK(a.is_object(), aw, " must be an object {seq, head_size, forward_s, backward_s}");
      check_json_keys(a, {"seq", "head_size", "forward_s", "backward_s", "source", "precision"}, aw, kFormat);
      c.device.attention_table.push_back({json_integer_or(a, "seq", 0, aw), json_integer_or(a, "head_size", 0, aw),
                                          json_number_or(a, "forward_s", 0, aw), json_number_or(a, "backward_s", 0, aw),
                                          json_string_or(a, "source", "", aw),
                                          parse_precision(json_string_or(a, "precision", "fp32", aw))});
    }
  }
  ARTEL_CHECK(j.contains("links") && j["links"].is_object(), origin,
              ": needs an object \"links\" with \"intra_host\" and \"inter_host\"");
  c.intra_host = parse_link(j["links"], "intra_host", origin + ": links");
  c.inter_host = parse_link(j["links"], "inter_host", origin + ": links");
  try {
    c.validate();
  } catch (const Error& e) {  // validate() says "cluster: ..."; the file's name says which
    const std::string what = e.what(), prefix = "cluster: ";
    throw Error(origin + ": " + (what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what));
  }
  return c;
}

Cluster read_cluster(const std::string& path) {
  return parse_cluster(read_json_file(path, "cluster file",
                                      "check the path passed to --cluster (e.g. data/clusters/selene.json)",
                                      "see docs/PLAN.md for the cluster format"),
                       path);
}

nlohmann::ordered_json to_json(const Cluster& c) {
  nlohmann::ordered_json j;
  j["name"] = c.name;
  j["hosts"] = sourced_json(c.hosts);
  j["workers_per_host"] = sourced_json(c.workers_per_host);
  if (c.cores_per_host.value > 0) j["cores_per_host"] = sourced_json(c.cores_per_host);
  nlohmann::ordered_json d;
  d["name"] = c.device.name;
  d["peak_flops"] = {{"fp32", sourced_json(c.device.peak_fp32)}, {"bf16", sourced_json(c.device.peak_bf16)}};
  d["gemm_efficiency"] = sourced_json(c.device.gemm_efficiency);
  d["memory_bytes"] = sourced_json(c.device.memory_bytes);
  if (c.device.runtime_bytes.value > 0) d["runtime_bytes"] = sourced_json(c.device.runtime_bytes);
  if (c.device.runtime_bytes_with_peers.value > 0)
    d["runtime_bytes_with_peers"] = sourced_json(c.device.runtime_bytes_with_peers);
  d["memory_bandwidth"] = sourced_json(c.device.memory_bandwidth);
  d["memory_efficiency"] = sourced_json(c.device.memory_efficiency);
  d["gemm_table"] = nlohmann::ordered_json::array();
  for (const GemmRate& g : c.device.gemm_table) {
    d["gemm_table"].push_back({{"precision", precision_name(g.precision)},
                               {"m", g.m},
                               {"n", g.n},
                               {"k", g.k},
                               {"flops_per_s", g.flops_per_s},
                               {"source", g.source}});
  }
  if (!c.device.attention_table.empty()) {
    d["attention_table"] = nlohmann::ordered_json::array();
    for (const AttentionRate& a : c.device.attention_table) {
      d["attention_table"].push_back({{"precision", precision_name(a.precision)},
                                      {"seq", a.seq},
                                      {"head_size", a.head_size},
                                      {"forward_s", a.forward_s},
                                      {"backward_s", a.backward_s},
                                      {"source", a.source}});
    }
  }
  j["device"] = d;
  for (const auto& [key, link] :
       {std::pair<const char*, const Link*>{"intra_host", &c.intra_host}, {"inter_host", &c.inter_host}}) {
    j["links"][key] = {{"alpha", sourced_json(link->alpha)}, {"beta", sourced_json(link->beta)}};
  }
  return j;
}

}  // namespace artel::plan

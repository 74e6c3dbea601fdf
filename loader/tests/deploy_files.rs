//! The deployment files, parsed, with the fields that matter checked (issue 20):
//! `compose/<system>/docker-compose.yml` for every system that runs as a server (pinned
//! tags, healthchecks, loopback-only ports, one CPU and memory budget per system, the
//! sampler targets beside each), `compose/kubernetes/*.yaml` (an Indexed Job whose
//! pods pass their index, the loader count and loader 0's rendezvous on the command
//! line; requests equal to limits in whole CPUs; one pinned image everywhere; a merge
//! Job over every loader's directory) and `docker/Dockerfile`.
//!
//! These are the project's own rules; the formats themselves (Compose spec, Kubernetes
//! schemas, Dockerfile lint) are checked by `compose/lint.sh`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_yaml::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

fn read(rel: &str) -> String {
    let p = root().join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn yaml(rel: &str) -> Value {
    serde_yaml::from_str(&read(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// Every document of a multi-document YAML file.
fn yaml_docs(rel: &str) -> Vec<Value> {
    let text = read(rel);
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).unwrap_or_else(|e| panic!("{rel}: {e}")))
        .filter(|v| !v.is_null())
        .collect()
}

/// What went wrong, all of it at once rather than the first thing.
#[derive(Debug, Default)]
struct Problems(Vec<String>);

impl Problems {
    fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.0.push(what());
        }
    }

    fn assert_none(self, about: &str) {
        assert!(self.0.is_empty(), "{about}:\n  - {}", self.0.join("\n  - "));
    }
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn seq(v: &Value) -> &[Value] {
    v.as_sequence().map(Vec::as_slice).unwrap_or(&[])
}

fn strings(v: &Value) -> Vec<String> {
    seq(v).iter().filter_map(text).collect()
}

// ---------------------------------------------------------------------------------
// Images and quantities

/// `(name, tag)` of an image reference; the tag is `None` when there is none (a port
/// in the registry host is not a tag).
fn split_image(image: &str) -> (String, Option<String>) {
    let image = image.split('@').next().unwrap_or(image);
    let slash = image.rfind('/').map_or(0, |i| i + 1);
    match image[slash..].rfind(':') {
        Some(i) => (
            image[..slash + i].to_string(),
            Some(image[slash + i + 1..].to_string()),
        ),
        None => (image.to_string(), None),
    }
}

/// Pinned: a digest, or a tag that names a version (at least `major.minor`), never
/// `latest` or a bare codename that moves.
fn pinned(image: &str) -> bool {
    if image.contains("@sha256:") {
        return true;
    }
    let Some(tag) = split_image(image).1 else {
        return false;
    };
    if tag == "latest" {
        return false;
    }
    let b = tag.as_bytes();
    (1..b.len().saturating_sub(1))
        .any(|i| b[i] == b'.' && b[i - 1].is_ascii_digit() && b[i + 1].is_ascii_digit())
}

/// A Kubernetes CPU quantity in cores: `2`, `"2"`, `"1.5"`, `"500m"`.
fn k8s_cpu(v: &Value) -> Option<f64> {
    let s = text(v)?;
    match s.strip_suffix('m') {
        Some(milli) => milli.parse::<f64>().ok().map(|m| m / 1000.0),
        None => s.parse().ok(),
    }
}

/// A byte size with a binary or decimal suffix: Kubernetes (`4Gi`, `512Mi`, `4G`) and
/// Compose (`4g`, `512m`, `4gb`, a plain number of bytes).
fn bytes(v: &Value) -> Option<u64> {
    let s = text(v)?.to_ascii_lowercase();
    let digits = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (n, unit) = s.split_at(digits);
    let n: f64 = n.parse().ok()?;
    let k = match unit {
        "" | "b" => 1u64,
        "k" | "kb" | "ki" | "kib" => 1 << 10,
        "m" | "mb" | "mi" | "mib" => 1 << 20,
        "g" | "gb" | "gi" | "gib" => 1 << 30,
        _ => return None,
    };
    Some((n * k as f64).round() as u64)
}

// ---------------------------------------------------------------------------------
// Compose

/// The systems that run as a server of their own (all but the in-process control
/// broker): each has a compose file.
fn server_systems() -> Vec<&'static str> {
    adapters::System::all()
        .filter(|s| !s.capabilities().in_process)
        .map(|s| s.name())
        .collect()
}

#[derive(Debug)]
struct Service {
    file: String,
    name: String,
    /// `None` for the services `docker compose up` starts; else the profile.
    profile: Option<String>,
    v: Value,
}

fn compose_services() -> Vec<Service> {
    let mut out = Vec::new();
    for sys in server_systems() {
        let file = format!("compose/{sys}/docker-compose.yml");
        let doc = yaml(&file);
        let services = doc["services"]
            .as_mapping()
            .unwrap_or_else(|| panic!("{file}: no services"));
        for (name, v) in services {
            let profiles = strings(&v["profiles"]);
            assert!(
                profiles.len() <= 1,
                "{file}: {name:?} is in several profiles {profiles:?}: its budget and sampler targets would be ambiguous"
            );
            out.push(Service {
                file: file.clone(),
                name: text(name).unwrap(),
                profile: profiles.into_iter().next(),
                v: v.clone(),
            });
        }
    }
    out
}

/// The sampler-targets file of a group of services: `sampler-targets.yaml` for the
/// default group, `sampler-targets.<profile>.yaml` for a profile.
fn targets_file(sys_dir: &str, profile: Option<&str>) -> String {
    match profile {
        None => format!("{sys_dir}/sampler-targets.yaml"),
        Some(p) => format!("{sys_dir}/sampler-targets.{p}.yaml"),
    }
}

fn sys_dir(file: &str) -> &str {
    file.rsplit_once('/').map_or(file, |(d, _)| d)
}

#[test]
fn every_server_system_has_a_compose_file() {
    let mut p = Problems::default();
    for sys in server_systems() {
        let f = root().join(format!("compose/{sys}/docker-compose.yml"));
        p.check(f.exists(), || format!("{} is missing", f.display()));
        let readme = read(&format!("compose/{sys}/README.md"));
        p.check(readme.contains("docker-compose.yml"), || {
            format!("compose/{sys}/README.md does not point at its docker-compose.yml")
        });
    }
    let index = read("compose/README.md");
    for sys in server_systems() {
        p.check(index.contains(&format!("{sys}/docker-compose.yml")), || {
            format!("compose/README.md does not index {sys}/docker-compose.yml")
        });
    }
    p.assert_none("compose files");
}

#[test]
fn compose_services_are_pinned_healthchecked_and_on_loopback_only() {
    let mut p = Problems::default();
    let services = compose_services();
    assert!(services.len() >= server_systems().len());
    for s in &services {
        let at = format!("{}: service {}", s.file, s.name);
        let image = text(&s.v["image"]).unwrap_or_default();
        p.check(pinned(&image), || {
            format!("{at}: image {image:?} is not pinned to a version tag")
        });
        p.check(text(&s.v["container_name"]).is_some(), || {
            format!("{at}: no container_name (the sampler target names it)")
        });

        let hc = &s.v["healthcheck"];
        let test = strings(&hc["test"]);
        let test_line = text(&hc["test"]);
        p.check(
            (!test.is_empty() && test[0] != "NONE") || test_line.is_some_and(|t| !t.is_empty()),
            || format!("{at}: no healthcheck test"),
        );
        p.check(hc["disable"].as_bool() != Some(true), || {
            format!("{at}: healthcheck disabled")
        });
        p.check(text(&hc["interval"]).is_some(), || {
            format!("{at}: healthcheck without an interval")
        });

        p.check(s.v["network_mode"].as_str() != Some("host"), || {
            format!("{at}: network_mode host publishes every port on every interface")
        });
        for port in seq(&s.v["ports"]) {
            let loopback = match port {
                Value::String(short) => short.starts_with("127.0.0.1:"),
                Value::Mapping(_) => port["host_ip"].as_str() == Some("127.0.0.1"),
                _ => false,
            };
            p.check(loopback, || {
                format!("{at}: port {port:?} is not bound to 127.0.0.1")
            });
        }
    }
    p.assert_none("compose services");
}

/// The budget compose/README.md states: "**2 CPUs, 4 GiB**".
fn documented_budget() -> (f64, u64) {
    let index = read("compose/README.md");
    let line = index
        .lines()
        .find(|l| l.contains("Budget per system:"))
        .expect("compose/README.md states the budget as 'Budget per system: **N CPUs, M GiB**'");
    let bold = line
        .split("**")
        .nth(1)
        .expect("the budget in bold: **N CPUs, M GiB**");
    let (cpus, mem) = bold.split_once(',').expect("**N CPUs, M GiB**");
    let cpus: f64 = cpus.trim().trim_end_matches("CPUs").trim().parse().unwrap();
    let gib: f64 = mem.trim().trim_end_matches("GiB").trim().parse().unwrap();
    (cpus, (gib * (1u64 << 30) as f64) as u64)
}

#[test]
fn every_system_gets_the_same_cpu_and_memory_budget() {
    let (budget_cpus, budget_mem) = documented_budget();
    let mut p = Problems::default();
    let mut groups: BTreeMap<(String, Option<String>), (f64, u64)> = BTreeMap::new();
    for s in compose_services() {
        let at = format!("{}: service {}", s.file, s.name);
        let cpus = text(&s.v["cpus"])
            .and_then(|c| c.parse::<f64>().ok())
            .or_else(|| {
                text(&s.v["deploy"]["resources"]["limits"]["cpus"]).and_then(|c| c.parse().ok())
            });
        let mem = bytes(&s.v["mem_limit"])
            .or_else(|| bytes(&s.v["deploy"]["resources"]["limits"]["memory"]));
        p.check(cpus.is_some(), || format!("{at}: no CPU limit (cpus)"));
        p.check(mem.is_some(), || {
            format!("{at}: no memory limit (mem_limit)")
        });
        p.check(bytes(&s.v["memswap_limit"]) == mem, || {
            format!("{at}: memswap_limit differs from mem_limit: the container may swap beyond its budget")
        });
        let g = groups
            .entry((s.file.clone(), s.profile.clone()))
            .or_default();
        g.0 += cpus.unwrap_or(0.0);
        g.1 += mem.unwrap_or(0);
    }
    for ((file, profile), (cpus, mem)) in &groups {
        let what = match profile {
            None => file.clone(),
            Some(pr) => format!("{file} (profile {pr})"),
        };
        p.check((cpus - budget_cpus).abs() < 1e-9 && *mem == budget_mem, || {
            format!(
                "{what}: {cpus} CPUs and {:.2} GiB together, the budget is {budget_cpus} CPUs and {:.2} GiB",
                *mem as f64 / (1u64 << 30) as f64,
                budget_mem as f64 / (1u64 << 30) as f64
            )
        });
    }
    p.assert_none("budgets");
}

#[test]
fn sampler_targets_beside_each_compose_file_name_its_containers() {
    let mut p = Problems::default();
    let mut groups: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for s in compose_services() {
        let file = targets_file(sys_dir(&s.file), s.profile.as_deref());
        groups
            .entry(file)
            .or_default()
            .insert(text(&s.v["container_name"]).unwrap_or_default());
    }
    for (file, containers) in &groups {
        if !root().join(file).exists() {
            p.0.push(format!("{file} is missing"));
            continue;
        }
        let targets = strings(&yaml(file)["sample"]["targets"]);
        p.check(!targets.is_empty(), || {
            format!("{file}: no sample.targets list")
        });
        let mut named = BTreeSet::new();
        for t in &targets {
            let (_, spec) = loader::scenario::split_target(t);
            if let Err(e) = spec.parse::<sampler::TargetSpec>() {
                p.0.push(format!("{file}: target {t:?}: {e}"));
            }
            if let Some(c) = spec.strip_prefix("container:") {
                p.check(containers.contains(c), || {
                    format!("{file}: {t:?} names no container of its compose group {containers:?}")
                });
                named.insert(c.to_string());
            }
        }
        for c in containers {
            p.check(named.contains(c), || {
                format!("{file}: container {c} is not sampled: its cost would be left out")
            });
        }
        // The `--set` line in the file's comment says the same as its list.
        let body = read(file);
        let set = body
            .lines()
            .find_map(|l| l.split("--set 'sample.targets=").nth(1))
            .and_then(|rest| rest.split('\'').next());
        match set {
            None => {
                p.0.push(format!("{file}: no `--set 'sample.targets=[…]'` line"))
            }
            Some(list) => {
                let from_set: Vec<String> =
                    serde_yaml::from_str(list).unwrap_or_else(|e| panic!("{file}: {e}"));
                p.check(from_set == targets, || {
                    format!("{file}: the --set line says {from_set:?}, the list {targets:?}")
                });
            }
        }
    }
    p.assert_none("sampler targets");
}

// ---------------------------------------------------------------------------------
// Kubernetes

fn manifests() -> Vec<(String, Value)> {
    let dir = root().join("compose/kubernetes");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            name.ends_with(".yaml").then_some(name)
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no manifests in {}", dir.display());
    files
        .into_iter()
        .flat_map(|f| {
            let rel = format!("compose/kubernetes/{f}");
            yaml_docs(&rel).into_iter().map(move |d| (rel.clone(), d))
        })
        .collect()
}

fn of_kind<'a>(all: &'a [(String, Value)], kind: &str) -> Vec<&'a (String, Value)> {
    all.iter()
        .filter(|(_, d)| d["kind"].as_str() == Some(kind))
        .collect()
}

fn name_of(d: &Value) -> String {
    text(&d["metadata"]["name"]).unwrap_or_default()
}

/// Every pod spec in the manifests (Jobs' templates and bare Pods).
fn pod_specs(all: &[(String, Value)]) -> Vec<(String, &Value)> {
    all.iter()
        .filter_map(|(f, d)| match d["kind"].as_str() {
            Some("Job") => Some((
                format!("{f}: Job {}", name_of(d)),
                &d["spec"]["template"]["spec"],
            )),
            Some("Pod") => Some((format!("{f}: Pod {}", name_of(d)), &d["spec"])),
            _ => None,
        })
        .collect()
}

fn containers(spec: &Value) -> Vec<&Value> {
    seq(&spec["initContainers"])
        .iter()
        .chain(seq(&spec["containers"]))
        .collect()
}

/// The value of `--flag` in an argument list, as `--flag=value` or `--flag value`.
fn flag(args: &[String], name: &str) -> Option<String> {
    let eq = format!("{name}=");
    args.iter().enumerate().find_map(|(i, a)| {
        if let Some(v) = a.strip_prefix(&eq) {
            Some(v.to_string())
        } else if a == name {
            args.get(i + 1).cloned()
        } else {
            None
        }
    })
}

/// The loader Job: the one with an index.
fn loader_job(all: &[(String, Value)]) -> &(String, Value) {
    let jobs: Vec<_> = of_kind(all, "Job")
        .into_iter()
        .filter(|(_, d)| {
            !d["spec"]["completionMode"].is_null() || d["spec"]["completions"].is_i64()
        })
        .collect();
    assert_eq!(
        jobs.len(),
        1,
        "exactly one loader Job (with completions): {jobs:?}"
    );
    jobs[0]
}

fn loader_container(job: &Value) -> &Value {
    let cs = seq(&job["spec"]["template"]["spec"]["containers"]);
    cs.iter()
        .find(|c| strings(&c["args"]).first().map(String::as_str) == Some("run"))
        .expect("a container of the loader Job runs `crossbench run`")
}

#[test]
fn the_loader_job_is_indexed_and_passes_index_count_and_rendezvous() {
    let all = manifests();
    let (file, job) = loader_job(&all);
    let job_name = name_of(job);
    let spec = &job["spec"];
    let mut p = Problems::default();
    p.check(spec["completionMode"].as_str() == Some("Indexed"), || {
        format!(
            "{file}: completionMode is {:?}, not Indexed",
            spec["completionMode"]
        )
    });
    let completions = spec["completions"].as_i64();
    let parallelism = spec["parallelism"].as_i64();
    p.check(completions.is_some_and(|n| n >= 2), || {
        format!("{file}: completions {completions:?}: several loaders need at least 2")
    });
    p.check(parallelism == completions, || {
        format!("{file}: parallelism {parallelism:?} != completions {completions:?}: every loader must run at once to meet at the barrier")
    });
    p.check(spec["backoffLimitPerIndex"].as_i64() == Some(0), || {
        format!("{file}: backoffLimitPerIndex must be 0: a retried loader would join a cell that has moved on")
    });
    let pod = &spec["template"]["spec"];
    p.check(pod["restartPolicy"].as_str() == Some("Never"), || {
        format!("{file}: restartPolicy must be Never")
    });
    let n = completions.unwrap_or(0);
    let c = loader_container(job);
    let args = strings(&c["args"]);

    // The index: the Job's completion index, from the env the Job controller sets (or
    // declared from the pod annotation that carries it).
    p.check(
        flag(&args, "--loader-index").as_deref() == Some("$(JOB_COMPLETION_INDEX)"),
        || {
            format!(
                "{file}: --loader-index is {:?}, not $(JOB_COMPLETION_INDEX)",
                flag(&args, "--loader-index")
            )
        },
    );
    for e in seq(&c["env"]) {
        if e["name"].as_str() == Some("JOB_COMPLETION_INDEX") {
            p.check(
                e["valueFrom"]["fieldRef"]["fieldPath"].as_str()
                    == Some("metadata.annotations['batch.kubernetes.io/job-completion-index']"),
                || format!("{file}: JOB_COMPLETION_INDEX is declared, but not from the job-completion-index annotation"),
            );
        }
    }
    p.check(flag(&args, "--loader-count") == Some(n.to_string()), || {
        format!(
            "{file}: --loader-count {:?} != completions {n}",
            flag(&args, "--loader-count")
        )
    });

    // The rendezvous: loader 0 by its stable name through the headless Service.
    let subdomain = text(&pod["subdomain"]).unwrap_or_default();
    let services = of_kind(&all, "Service");
    let svc = services.iter().find(|(_, s)| name_of(s) == subdomain);
    p.check(svc.is_some(), || {
        format!("{file}: subdomain {subdomain:?} names no Service of the manifests")
    });
    if let Some((sfile, s)) = svc {
        p.check(s["spec"]["clusterIP"].as_str() == Some("None"), || {
            format!("{sfile}: Service {subdomain} is not headless (clusterIP: None)")
        });
        let labels = &spec["template"]["metadata"]["labels"];
        let selector = s["spec"]["selector"]
            .as_mapping()
            .cloned()
            .unwrap_or_default();
        p.check(
            !selector.is_empty()
                && selector
                    .iter()
                    .all(|(k, v)| &labels[k.as_str().unwrap_or("")] == v),
            || format!("{sfile}: the selector of {subdomain} does not select the loader pods"),
        );
        let port = seq(&s["spec"]["ports"])
            .first()
            .and_then(|pt| pt["port"].as_i64());
        let want = format!("http://{job_name}-0.{subdomain}:{}", port.unwrap_or(0));
        p.check(
            flag(&args, "--rendezvous").as_deref() == Some(want.as_str()),
            || {
                format!(
                    "{file}: --rendezvous is {:?}, loader 0 is {want}",
                    flag(&args, "--rendezvous")
                )
            },
        );
        let listen = flag(&args, "--rendezvous-listen").unwrap_or_default();
        p.check(
            port.is_some_and(|pt| listen.ends_with(&format!(":{pt}"))),
            || {
                format!(
                    "{file}: --rendezvous-listen {listen:?} is not on the Service's port {port:?}"
                )
            },
        );
        p.check(
            seq(&c["ports"])
                .iter()
                .any(|cp| cp["containerPort"].as_i64() == port),
            || format!("{file}: the loader container does not declare port {port:?}"),
        );
    }

    // The scenario: a file of a mounted ConfigMap; the output: a volume, one
    // directory per index.
    let volumes = seq(&pod["volumes"]);
    let mount_of = |path: &str| {
        seq(&c["volumeMounts"])
            .iter()
            .filter(|m| {
                m["mountPath"]
                    .as_str()
                    .is_some_and(|mp| path.starts_with(&format!("{}/", mp.trim_end_matches('/'))))
            })
            .max_by_key(|m| m["mountPath"].as_str().map_or(0, str::len))
            .and_then(|m| volumes.iter().find(|v| v["name"] == m["name"]))
    };
    let scenario = args.get(1).cloned().unwrap_or_default();
    let sv = mount_of(&scenario);
    p.check(
        sv.is_some_and(|v| v["configMap"]["name"].is_string()),
        || format!("{file}: the scenario {scenario:?} is not a file of a mounted ConfigMap"),
    );
    if let Some(v) = sv {
        let cm_name = text(&v["configMap"]["name"]).unwrap_or_default();
        let key = scenario.rsplit('/').next().unwrap_or_default();
        let items = seq(&v["configMap"]["items"]);
        let key = items
            .iter()
            .find(|i| i["path"].as_str() == Some(key))
            .and_then(|i| text(&i["key"]))
            .unwrap_or_else(|| key.to_string());
        let has = of_kind(&all, "ConfigMap")
            .iter()
            .any(|(_, cm)| name_of(cm) == cm_name && cm["data"][key.as_str()].is_string());
        p.check(has, || {
            format!("{file}: no ConfigMap {cm_name} with key {key} in the manifests")
        });
    }
    let out = flag(&args, "--out").unwrap_or_default();
    p.check(out.contains("$(JOB_COMPLETION_INDEX)"), || {
        format!("{file}: --out {out:?} is not one directory per index")
    });
    p.check(
        mount_of(&out).is_some_and(|v| v["persistentVolumeClaim"]["claimName"].is_string()),
        || {
            format!(
                "{file}: --out {out:?} is not on a PersistentVolumeClaim the merge Job can read"
            )
        },
    );
    p.assert_none("the loader Job");
}

#[test]
fn every_container_requests_what_it_is_limited_to_in_whole_cpus() {
    let all = manifests();
    let mut p = Problems::default();
    let specs = pod_specs(&all);
    assert!(specs.len() >= 2, "a loader Job and a merge Job at least");
    for (at, spec) in specs {
        for c in containers(spec) {
            let at = format!("{at}, container {}", text(&c["name"]).unwrap_or_default());
            let r = &c["resources"];
            let (rc, lc) = (k8s_cpu(&r["requests"]["cpu"]), k8s_cpu(&r["limits"]["cpu"]));
            let (rm, lm) = (
                bytes(&r["requests"]["memory"]),
                bytes(&r["limits"]["memory"]),
            );
            p.check(rc.is_some() && rc == lc, || {
                format!("{at}: CPU requests {rc:?} != limits {lc:?}")
            });
            p.check(rm.is_some() && rm == lm, || {
                format!("{at}: memory requests {rm:?} != limits {lm:?}")
            });
            p.check(lc.is_some_and(|c| c >= 1.0 && c.fract() == 0.0), || {
                format!("{at}: CPU {lc:?} is not a whole number of cores")
            });
        }
    }
    p.assert_none("resources");
}

fn workspace_version() -> String {
    let cargo: toml_lite::Table = toml_lite::parse(&read("Cargo.toml"));
    cargo
        .get("workspace.package", "version")
        .expect("workspace.package.version")
}

#[test]
fn one_pinned_crossbench_image_everywhere() {
    let all = manifests();
    let mut p = Problems::default();
    let version = workspace_version();
    let want = format!("crossbench:{version}");
    let mut seen = BTreeSet::new();
    for (at, spec) in pod_specs(&all) {
        for c in containers(spec) {
            let image = text(&c["image"]).unwrap_or_default();
            seen.insert(image.clone());
            let (name, tag) = split_image(&image);
            p.check(name == "crossbench", || {
                format!("{at}: image {image:?} is not crossbench")
            });
            p.check(pinned(&image), || {
                format!("{at}: image {image:?} is not pinned")
            });
            p.check(tag.as_deref() == Some(version.as_str()), || {
                format!("{at}: image {image:?}, the workspace (Cargo.toml) is version {version}")
            });
        }
    }
    p.check(seen.len() == 1, || {
        format!("more than one crossbench image: {seen:?}")
    });
    let readme = read("compose/kubernetes/README.md");
    p.check(readme.contains(&want), || {
        format!("compose/kubernetes/README.md does not document the image {want}")
    });
    p.check(
        read("docker/Dockerfile").contains(&format!("-t {want}")),
        || format!("docker/Dockerfile does not say it is built as {want}"),
    );
    p.assert_none("the crossbench image");
}

#[test]
fn the_merge_job_merges_every_loader_directory_and_verifies_the_cell() {
    let all = manifests();
    let (_, job) = loader_job(&all);
    let n = job["spec"]["completions"].as_i64().unwrap_or(0);
    let out = flag(&strings(&loader_container(job)["args"]), "--out").unwrap_or_default();
    let base = out
        .rsplit_once('/')
        .map(|(b, _)| b.to_string())
        .unwrap_or_default();
    let claim = |spec: &Value| -> BTreeSet<String> {
        seq(&spec["volumes"])
            .iter()
            .filter_map(|v| text(&v["persistentVolumeClaim"]["claimName"]))
            .collect()
    };
    let loader_claims = claim(&job["spec"]["template"]["spec"]);

    let mut merges = Vec::new();
    for (file, d) in of_kind(&all, "Job") {
        let spec = &d["spec"]["template"]["spec"];
        for c in containers(spec) {
            let args = strings(&c["args"]);
            if args.first().map(String::as_str) == Some("merge") {
                merges.push((file, spec, args));
            }
        }
    }
    assert_eq!(
        merges.len(),
        1,
        "exactly one container runs `crossbench merge`"
    );
    let (file, spec, args) = &merges[0];
    let mut p = Problems::default();
    let dirs: Vec<&String> = args[1..].iter().filter(|a| !a.starts_with("--")).collect();
    let want: Vec<String> = (0..n)
        .map(|j| out.replace("$(JOB_COMPLETION_INDEX)", &j.to_string()))
        .collect();
    p.check(
        dirs.iter()
            .map(|d| d.as_str())
            .eq(want.iter().map(String::as_str)),
        || format!("{file}: merges {dirs:?}, the loaders write {want:?}"),
    );
    let merged = flag(args, "--out").unwrap_or_default();
    p.check(merged.starts_with(&format!("{base}/")) && !want.contains(&merged), || {
        format!("{file}: merges into {merged:?}, not a directory of its own beside the loaders' under {base}")
    });
    p.check(
        seq(&spec["initContainers"])
            .iter()
            .any(|c| strings(&c["args"]).first().map(String::as_str) == Some("merge")),
        || format!("{file}: the merge is not an init container (verify and report need it done)"),
    );
    p.check(
        seq(&spec["containers"]).iter().any(|c| {
            let a = strings(&c["args"]);
            a.first().map(String::as_str) == Some("verify") && a.get(1) == Some(&merged)
        }),
        || format!("{file}: no container verifies the merged cell {merged}"),
    );
    p.check(
        !loader_claims.is_empty() && claim(spec) == loader_claims,
        || format!("{file}: the merge Job does not mount the loaders' volume {loader_claims:?}"),
    );
    p.assert_none("the merge Job");
}

#[test]
fn the_configmap_scenario_is_a_scenario_for_several_loaders() {
    let all = manifests();
    let mut p = Problems::default();
    let cms = of_kind(&all, "ConfigMap");
    let Some((file, cm)) = cms
        .iter()
        .find(|(_, cm)| cm["data"]["scenario.yaml"].is_string())
        .copied()
    else {
        panic!("no ConfigMap with a scenario.yaml in compose/kubernetes");
    };
    p.check(cm["data"]["cell"].is_string(), || {
        format!("{file}: no `cell` key (the directory every step uses)")
    });
    let text_ = cm["data"]["scenario.yaml"].as_str().unwrap();
    let v: Value = serde_yaml::from_str(text_).unwrap();
    let topology = v["loaders"]["topology"].as_str();
    p.check(matches!(topology, Some("shared" | "partitioned")), || {
        format!("{file}: loaders.topology is {topology:?}, not shared or partitioned")
    });
    p.check(v["loaders"]["barrier_timeout"].is_string(), || {
        format!("{file}: no loaders.barrier_timeout")
    });
    // The scenario as the loader reads it, `loaders` section included.
    if let Err(e) = loader::scenario::parse(text_, file, &[]) {
        p.0.push(format!("{file}: scenario.yaml does not parse: {e}"));
    }
    p.assert_none("the scenario ConfigMap");
}

/// Every crossbench container's command line, as Kubernetes expands it (`$(VAR)`
/// with a value of the right kind), is accepted by the binary's own parser, and the
/// loader's resolves to a loader of the manifests' count with the rendezvous set.
#[test]
fn every_container_command_line_is_one_the_binary_accepts() {
    use clap::Parser;
    let all = manifests();
    let mut p = Problems::default();
    let mut seen = 0;
    for (file, spec) in pod_specs(&all) {
        for c in containers(spec) {
            // The crossbench image running crossbench (not another entrypoint, as
            // the fetch pod's `sleep`).
            if !c["image"].as_str().unwrap_or("").contains("crossbench") || !c["command"].is_null()
            {
                continue;
            }
            let args: Vec<String> = strings(&c["args"])
                .into_iter()
                .map(|a| {
                    a.replace("$(JOB_COMPLETION_INDEX)", "1")
                        .replace("$(CELL)", "cell-001")
                })
                .collect();
            seen += 1;
            let argv = std::iter::once("crossbench".to_string()).chain(args.iter().cloned());
            if let Err(e) = loader::cli::Cli::try_parse_from(argv) {
                p.0.push(format!(
                    "{file}: `crossbench {}` is refused by the binary: {e}",
                    args.join(" ")
                ));
            }
        }
    }
    assert!(
        seen >= 3,
        "the loader, the merge and the verify containers at least"
    );
    // The loader's flags with the ConfigMap's scenario resolve to one loader of N.
    let (file, job) = loader_job(&all);
    let args = strings(&loader_container(job)["args"]);
    let n: u64 = flag(&args, "--loader-count").unwrap().parse().unwrap();
    let cm = of_kind(&all, "ConfigMap")
        .into_iter()
        .find(|(_, d)| d["data"]["scenario.yaml"].is_string())
        .expect("the scenario ConfigMap");
    let text_ = cm.1["data"]["scenario.yaml"].as_str().unwrap();
    let sets = vec![
        format!("loaders.count={n}"),
        format!(
            "loaders.rendezvous={}",
            flag(&args, "--rendezvous").unwrap()
        ),
    ];
    let s = loader::scenario::parse(text_, &cm.0, &sets).unwrap();
    let flags = loader::fleet::LoaderFlags {
        index: Some(n - 1),
        listen: flag(&args, "--rendezvous-listen"),
        ..Default::default()
    };
    match loader::fleet::FleetSpec::resolve(&s, &flags, None) {
        Ok(f) => p.check(
            f.share.count == n && f.rendezvous_host_port().is_some(),
            || format!("{file}: resolves to {f:?}"),
        ),
        Err(e) => {
            p.0.push(format!("{file}: the loader's flags do not resolve: {e}"))
        }
    }
    p.assert_none("the containers' command lines");
}

// ---------------------------------------------------------------------------------
// Dockerfile

#[test]
fn the_dockerfile_builds_a_release_binary_and_runs_it_as_a_user() {
    let df = read("docker/Dockerfile");
    // Instructions with their continuation lines joined, comments dropped.
    let mut instr: Vec<String> = Vec::new();
    let mut cur = String::new();
    for line in df.lines() {
        let t = line.trim();
        if cur.is_empty() && (t.is_empty() || t.starts_with('#')) {
            continue;
        }
        match t.strip_suffix('\\') {
            Some(more) => {
                cur.push_str(more);
                cur.push(' ');
            }
            None => {
                cur.push_str(t);
                instr.push(std::mem::take(&mut cur));
            }
        }
    }
    let of = |kw: &str| -> Vec<&String> {
        instr
            .iter()
            .filter(|i| {
                i.split_whitespace()
                    .next()
                    .is_some_and(|w| w.eq_ignore_ascii_case(kw))
            })
            .collect()
    };
    let mut p = Problems::default();
    let froms = of("FROM");
    p.check(froms.len() >= 2, || format!("not multi-stage: {froms:?}"));
    let image = |f: &str| f.split_whitespace().nth(1).unwrap_or_default().to_string();
    let builder = froms.first().map(|f| image(f)).unwrap_or_default();
    let runtime = froms.last().map(|f| image(f)).unwrap_or_default();
    for i in [&builder, &runtime] {
        p.check(pinned(i), || format!("FROM {i} is not pinned to a version"));
    }
    // The builder's Rust is at least the workspace's rust-version.
    let cargo = toml_lite::parse(&read("Cargo.toml"));
    let msrv = cargo.get("workspace.package", "rust-version").unwrap();
    let ver = |s: &str| -> Vec<u32> { s.split('.').filter_map(|x| x.parse().ok()).collect() };
    let (bname, btag) = split_image(&builder);
    let btag = btag.unwrap_or_default();
    let rust = btag.split('-').next().unwrap_or_default();
    p.check(bname == "rust" && ver(rust) >= ver(&msrv), || {
        format!("builder {builder}: not rust >= {msrv}")
    });
    // Same Debian release in both stages (the binary links the builder's glibc).
    let (rname, rtag) = split_image(&runtime);
    let rtag = rtag.unwrap_or_default();
    p.check(
        rname == "debian"
            && btag.ends_with("-bookworm")
            && (rtag.starts_with("12.") || rtag.starts_with("bookworm"))
            && rtag.ends_with("-slim"),
        || format!("runtime {runtime}: not the builder's Debian (bookworm, 12) in its slim form"),
    );
    let runs = of("RUN")
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    p.check(
        runs.contains("cargo build --release -p crossbench --features kafka,queen --locked"),
        || "no `cargo build --release -p crossbench --features kafka,queen --locked`".into(),
    );
    for pkg in ["cmake", "libcurl4-openssl-dev", "pkg-config"] {
        p.check(runs.contains(pkg), || {
            format!("the builder does not install {pkg}")
        });
    }
    let user = of("USER")
        .last()
        .map(|u| u.split_whitespace().nth(1).unwrap_or_default().to_string());
    p.check(
        user.as_deref().is_some_and(|u| {
            let name = u.split(':').next().unwrap_or_default();
            name != "root" && name != "0"
        }),
        || format!("the image runs as {user:?}, not a user of its own"),
    );
    let entry = of("ENTRYPOINT")
        .last()
        .map(|e| e.to_string())
        .unwrap_or_default();
    p.check(entry.contains("\"/usr/local/bin/crossbench\""), || {
        format!("ENTRYPOINT is {entry:?}, not the crossbench binary")
    });
    p.check(
        of("COPY")
            .iter()
            .any(|c| c.contains("--from=") && c.ends_with("/usr/local/bin/crossbench")),
        || "the binary is not copied from the builder to /usr/local/bin/crossbench".into(),
    );
    // The build context keeps the sources and .git (build.rs records the commit) and
    // leaves out what the builds and runs leave behind.
    let ignore = read(".dockerignore");
    let ignored: Vec<&str> = ignore
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    for must in ["target", "runs"] {
        p.check(ignored.iter().any(|l| l.trim_matches('/') == must), || {
            format!(".dockerignore does not leave out {must}/")
        });
    }
    p.check(
        !ignored.iter().any(|l| l.trim_matches('/') == ".git"),
        || ".dockerignore leaves out .git: every cell would record commit `unknown`".into(),
    );
    p.assert_none("docker/Dockerfile");
}

/// Just enough TOML for `[section]` + `key = "value"` lines: the workspace's version
/// and rust-version (no TOML parser is a dependency of this crate).
mod toml_lite {
    #[derive(Debug, Default)]
    pub struct Table(Vec<(String, String, String)>);

    pub fn parse(text: &str) -> Table {
        let mut section = String::new();
        let mut t = Table::default();
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or_default().trim();
            if let Some(s) = line.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
                section = s.trim().to_string();
            } else if let Some((k, v)) = line.split_once('=') {
                let v = v.trim();
                if let Some(v) = v.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
                    t.0.push((section.clone(), k.trim().to_string(), v.to_string()));
                }
            }
        }
        t
    }

    impl Table {
        pub fn get(&self, section: &str, key: &str) -> Option<String> {
            self.0
                .iter()
                .find(|(s, k, _)| s == section && k == key)
                .map(|(_, _, v)| v.clone())
        }
    }
}

// ---------------------------------------------------------------------------------
// The helpers themselves

#[test]
fn pinned_tags_and_quantities_are_read_as_meant() {
    assert!(pinned("ghcr.io/pgmq/pg17-pgmq:v1.13.0"));
    assert!(pinned("localhost:5000/crossbench:0.1.0"));
    assert!(pinned("postgres:15.19-bookworm"));
    assert!(pinned("x@sha256:0123"));
    assert!(!pinned("redpandadata/redpanda:latest"));
    assert!(!pinned("localhost:5000/crossbench"));
    assert!(!pinned("debian:bookworm-slim"));
    assert!(!pinned("postgres:15"));
    assert_eq!(
        split_image("localhost:5000/a/b:1.2").1.as_deref(),
        Some("1.2")
    );
    assert_eq!(k8s_cpu(&Value::from("500m")), Some(0.5));
    assert_eq!(k8s_cpu(&Value::from(2)), Some(2.0));
    assert_eq!(bytes(&Value::from("4Gi")), Some(4 << 30));
    assert_eq!(bytes(&Value::from("4g")), Some(4 << 30));
    assert_eq!(bytes(&Value::from("512Mi")), Some(512 << 20));
    assert_eq!(bytes(&Value::from("1073741824")), Some(1 << 30));
    let args: Vec<String> = ["run", "s.yaml", "--out", "/o", "--loader-count=3"]
        .map(String::from)
        .to_vec();
    assert_eq!(flag(&args, "--out").as_deref(), Some("/o"));
    assert_eq!(flag(&args, "--loader-count").as_deref(), Some("3"));
    assert_eq!(flag(&args, "--loader-index"), None);
}

//! Brokers a fault test owns: it starts them, the cell kills, pauses or restarts
//! them, and the test removes them. A fault test never touches the machine's
//! pre-started services (PostgreSQL on 5432, RabbitMQ on 5672, tansu on 9092).
//!
//! - [`PgCluster`]: a second PostgreSQL cluster (`pg_createcluster 15 cbfaults`, trust
//!   on loopback, its own port), with pgmq;
//! - [`RabbitNode`]: a RabbitMQ node of its own (node name, ports, data directory);
//! - [`Tansu`]: a tansu of its own (port, working directory, SQLite file).
//!
//! Every wait has a deadline; a victim that does not come up fails the test with the
//! tail of its log. `Drop` stops and removes it, whatever the test did.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// How long a victim may take to come up.
pub const UP_DEADLINE: Duration = Duration::from_secs(90);

fn sh(cmd: &str) -> (bool, String) {
    match Command::new("sh")
        .arg("-c")
        .arg(format!("{cmd} 2>&1"))
        .output()
    {
        Ok(o) => (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
        ),
        Err(e) => (false, e.to_string()),
    }
}

fn port_open(port: u16) -> bool {
    std::net::TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_millis(300),
    )
    .is_ok()
}

/// The last `n` lines of a file (or of several, globbed by the shell).
pub fn tail(path_glob: &str, n: usize) -> String {
    sh(&format!("tail -n {n} {path_glob}")).1
}

/// Wait until `up()` holds, at most `deadline`; the error carries `log`'s tail.
fn wait_until(
    what: &str,
    deadline: Duration,
    log: &str,
    mut up: impl FnMut() -> bool,
) -> Result<Duration, String> {
    let t0 = Instant::now();
    while t0.elapsed() < deadline {
        if up() {
            return Ok(t0.elapsed());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Err(format!(
        "{what} did not come up within {deadline:?}; its log ends with:\n{}",
        tail(log, 40)
    ))
}

/// Why a victim cannot be made on this machine (a missing tool), if it cannot.
fn missing(tools: &[&str]) -> Option<String> {
    let absent: Vec<&str> = tools
        .iter()
        .copied()
        .filter(|t| !sh(&format!("command -v {t}")).0)
        .collect();
    (!absent.is_empty()).then(|| format!("missing {}", absent.join(", ")))
}

/// A PostgreSQL cluster of the test's own, with pgmq.
pub struct PgCluster {
    pub version: String,
    pub name: String,
    pub port: u16,
}

impl PgCluster {
    /// `Err` with the reason when the machine cannot make one (no postgresql-common,
    /// no pgmq), or when it does not come up.
    pub fn start(port: u16) -> Result<PgCluster, String> {
        PgCluster::start_named(port, "cbfaults")
    }

    /// [`PgCluster::start`] under a cluster name of the caller's (tests of different
    /// files that may run at once keep to their own clusters).
    pub fn start_named(port: u16, name: &str) -> Result<PgCluster, String> {
        if let Some(m) = missing(&["pg_createcluster", "pg_ctlcluster", "psql"]) {
            return Err(m);
        }
        let version = std::fs::read_dir("/usr/lib/postgresql")
            .map_err(|e| format!("no /usr/lib/postgresql: {e}"))?
            .flatten()
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .max()
            .ok_or("no PostgreSQL version installed")?;
        let name = name.to_string();
        // A cluster left by a crashed run goes first.
        let _ = sh(&format!("pg_dropcluster --stop {version} {name}"));
        let (ok, out) = sh(&format!(
            "pg_createcluster {version} {name} -p {port} -- --auth=trust"
        ));
        if !ok {
            return Err(format!("pg_createcluster failed: {out}"));
        }
        let c = PgCluster {
            version,
            name,
            port,
        };
        let (ok, out) = sh(&format!("pg_ctlcluster {} {} start", c.version, c.name));
        if !ok {
            return Err(format!(
                "pg_ctlcluster start failed: {out}\n{}",
                c.log_tail()
            ));
        }
        c.wait_up(UP_DEADLINE)?;
        let (ok, out) = sh(&format!(
            "psql -h 127.0.0.1 -p {port} -U postgres -d postgres -v ON_ERROR_STOP=1 -c 'CREATE EXTENSION IF NOT EXISTS pgmq'"
        ));
        if !ok {
            return Err(format!("CREATE EXTENSION pgmq failed: {out}"));
        }
        Ok(c)
    }

    pub fn dsn(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    pub fn restart_command(&self) -> String {
        format!(
            "pg_ctlcluster {} {} restart -m fast",
            self.version, self.name
        )
    }

    pub fn start_command(&self) -> String {
        format!("pg_ctlcluster {} {} start", self.version, self.name)
    }

    /// Every process of the cluster (postmaster and backends).
    pub fn process_pattern(&self) -> String {
        format!("{}/{}", self.version, self.name)
    }

    /// The postmaster's pid, from the cluster's pid file.
    pub fn postmaster_pid(&self) -> Option<u32> {
        std::fs::read_to_string(format!(
            "/var/run/postgresql/{}-{}.pid",
            self.version, self.name
        ))
        .ok()?
        .lines()
        .next()?
        .trim()
        .parse()
        .ok()
    }

    pub fn log_path(&self) -> String {
        format!(
            "/var/log/postgresql/postgresql-{}-{}.log",
            self.version, self.name
        )
    }

    pub fn log_tail(&self) -> String {
        tail(&self.log_path(), 40)
    }

    pub fn ready(&self) -> bool {
        sh(&format!(
            "psql -h 127.0.0.1 -p {} -U postgres -d postgres -Atc 'select 1'",
            self.port
        ))
        .0
    }

    pub fn wait_up(&self, deadline: Duration) -> Result<Duration, String> {
        wait_until("the PostgreSQL cluster", deadline, &self.log_path(), || {
            self.ready()
        })
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        let _ = sh(&format!(
            "pg_dropcluster --stop {} {}",
            self.version, self.name
        ));
    }
}

/// A RabbitMQ node of the test's own.
pub struct RabbitNode {
    pub node: String,
    pub port: u16,
    pub dir: PathBuf,
}

impl RabbitNode {
    pub fn start(port: u16) -> Result<RabbitNode, String> {
        Self::start_with(
            port,
            &format!("listeners.tcp.default = 127.0.0.1:{port}\nloopback_users = none\n"),
            &[],
        )
    }

    /// A node whose `rabbitmq.conf` is `conf` (`{dir}` in it names the node's
    /// directory), `files` copied into that directory first (a TLS listener's
    /// certificates and key, readable by the server's user).
    pub fn start_with(port: u16, conf: &str, files: &[&Path]) -> Result<RabbitNode, String> {
        if let Some(m) = missing(&["rabbitmq-server", "rabbitmqctl"]) {
            return Err(m);
        }
        let node = format!("cbfault{port}@localhost");
        let dir = PathBuf::from(format!("/tmp/crossbench-rabbit-{port}"));
        // What a crashed run left.
        let _ = sh(&format!(
            "timeout 60 rabbitmqctl -q -n {node} stop >/dev/null 2>&1; true"
        ));
        if let Some(pid) = std::fs::read_to_string(dir.join("pid"))
            .ok()
            .and_then(|t| t.trim().parse::<u32>().ok())
        {
            let _ = sh(&format!("kill -9 {pid}"));
        }
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("log")).map_err(|e| e.to_string())?;
        std::fs::write(dir.join("enabled_plugins"), "[].\n").map_err(|e| e.to_string())?;
        for f in files {
            let name = f.file_name().ok_or("a file with no name")?;
            std::fs::copy(f, dir.join(name)).map_err(|e| format!("{}: {e}", f.display()))?;
        }
        std::fs::write(
            dir.join("rabbitmq.conf"),
            conf.replace("{dir}", &dir.display().to_string()),
        )
        .map_err(|e| e.to_string())?;
        // The server drops to the rabbitmq user: its files must be that user's.
        let _ = sh(&format!("chown -R rabbitmq:rabbitmq {}", dir.display()));
        let n = RabbitNode { node, port, dir };
        let (ok, out) = sh(&n.start_command());
        if !ok {
            return Err(format!("starting the node failed: {out}"));
        }
        n.wait_up(UP_DEADLINE)?;
        Ok(n)
    }

    fn env(&self) -> String {
        let d = self.dir.display();
        format!(
            "RABBITMQ_NODENAME={n} RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_NODE_PORT={p} RABBITMQ_DIST_PORT={dp} RABBITMQ_MNESIA_BASE={d}/mnesia RABBITMQ_LOG_BASE={d}/log RABBITMQ_PID_FILE={d}/pid RABBITMQ_ENABLED_PLUGINS_FILE={d}/enabled_plugins RABBITMQ_CONFIG_FILE={d}/rabbitmq",
            n = self.node,
            p = self.port,
            dp = self.port as u32 + 20000,
        )
    }

    /// Start the node in the background as the rabbitmq user (the server script
    /// itself, not Debian's wrapper, which would write the shared node's startup
    /// log), its output in its own log.
    pub fn start_command(&self) -> String {
        format!(
            "su rabbitmq -s /bin/sh -c 'cd /var/lib/rabbitmq && env HOME=/var/lib/rabbitmq {} setsid /usr/lib/rabbitmq/bin/rabbitmq-server >> {}/log/stdout.log 2>&1 < /dev/null &'",
            self.env(),
            self.dir.display()
        )
    }

    /// Stop the node, start it again, wait until it serves (a whole-node restart).
    pub fn restart_command(&self) -> String {
        format!(
            "rabbitmqctl -q -n {n} stop; {start}; for i in $(seq 1 60); do rabbitmqctl -q -n {n} await_startup --timeout 10 >/dev/null 2>&1 && exit 0; sleep 1; done; exit 1",
            n = self.node,
            start = self.start_command(),
        )
    }

    pub fn url(&self) -> String {
        format!("amqp://guest:guest@127.0.0.1:{}/%2f", self.port)
    }

    /// The node's Erlang VM, by its pid file (its command line does not name the
    /// node: RabbitMQ passes the name in the environment).
    pub fn target(&self) -> String {
        format!("pidfile:{}/pid", self.dir.display())
    }

    fn pid(&self) -> Option<u32> {
        std::fs::read_to_string(self.dir.join("pid"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    pub fn log_tail(&self) -> String {
        tail(&format!("{}/log/*.log", self.dir.display()), 40)
    }

    pub fn wait_up(&self, deadline: Duration) -> Result<Duration, String> {
        let log = format!("{}/log/*.log", self.dir.display());
        wait_until("the RabbitMQ node", deadline, &log, || {
            port_open(self.port)
                && sh(&format!(
                    "rabbitmqctl -q -n {} status >/dev/null",
                    self.node
                ))
                .0
        })
    }

    /// `rabbitmqctl <args>` on this node: (succeeded, output).
    pub fn ctl(&self, args: &str) -> (bool, String) {
        sh(&format!("rabbitmqctl -q -n {} {args}", self.node))
    }

    /// `rabbitmqctl list_queues` on this node.
    pub fn list_queues(&self, columns: &str) -> String {
        sh(&format!(
            "rabbitmqctl -q -n {} list_queues {columns}",
            self.node
        ))
        .1
    }

    /// The node's log lines at warning or error level, the last `n` of them (crash
    /// reports cut to their first lines), for a test that found a loss to print.
    pub fn log_warnings(&self, n: usize) -> String {
        sh(&format!(
            "grep -h -A3 -E '\\[(warning|error)\\]' {}/log/*.log 2>/dev/null | tail -{n}",
            self.dir.display()
        ))
        .1
    }
}

impl Drop for RabbitNode {
    fn drop(&mut self) {
        let _ = sh(&format!("timeout 60 rabbitmqctl -q -n {} stop", self.node));
        if let Some(pid) = self.pid() {
            let _ = sh(&format!("kill -9 {pid}"));
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A tansu of the test's own (the provisioned binary, its own port and directory).
pub struct Tansu {
    pub port: u16,
    pub dir: PathBuf,
    pub bin: PathBuf,
    /// More `tansu broker` arguments (`--authentication`).
    pub extra: String,
}

impl Tansu {
    pub fn start(port: u16) -> Result<Tansu, String> {
        let cache = std::env::var("CROSSBENCH_CACHE")
            .map(PathBuf::from)
            .unwrap_or_else(|_| {
                PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| "/root".into()))
                    .join(".cache/crossbench")
            });
        let bin = cache.join("tansu-0.6.0/bin/tansu");
        if !bin.exists() {
            return Err(format!(
                "no tansu at {} (scripts/provision/tansu.sh builds it)",
                bin.display()
            ));
        }
        let dir = PathBuf::from(format!("/tmp/crossbench-tansu-{port}"));
        let t = Tansu {
            port,
            dir,
            bin,
            extra: String::new(),
        };
        let _ = sh(&format!("pkill -9 -f -- '{}'", t.process_pattern()));
        let _ = std::fs::remove_dir_all(&t.dir);
        std::fs::create_dir_all(&t.dir).map_err(|e| e.to_string())?;
        let (ok, out) = sh(&t.start_command());
        if !ok {
            return Err(format!("starting tansu failed: {out}"));
        }
        t.wait_up(UP_DEADLINE)?;
        Ok(t)
    }

    /// Start it in the background from its own directory (tansu reads ./.env and
    /// keeps its SQLite file there).
    pub fn start_command(&self) -> String {
        format!(
            "cd {d} && setsid {b} broker --listener-url tcp://127.0.0.1:{p} --advertised-listener-url tcp://127.0.0.1:{p} --storage-engine sqlite://tansu.db {e} >> {d}/tansu.log 2>&1 < /dev/null &",
            d = self.dir.display(),
            b = self.bin.display(),
            p = self.port,
            e = self.extra,
        )
    }

    /// Stop it (its state kept) and start it again with `extra` arguments.
    pub fn restart_with(&mut self, extra: &str) -> Result<(), String> {
        let _ = sh(&format!("pkill -9 -f -- '{}'", self.process_pattern()));
        let gone = Instant::now() + Duration::from_secs(10);
        while port_open(self.port) && Instant::now() < gone {
            std::thread::sleep(Duration::from_millis(100));
        }
        self.extra = extra.to_string();
        let (ok, out) = sh(&self.start_command());
        if !ok {
            return Err(format!("starting tansu failed: {out}"));
        }
        self.wait_up(UP_DEADLINE).map(|_| ())
    }

    /// `tansu <args>` (a subcommand such as `user create`): (succeeded, output).
    pub fn cli(&self, args: &str) -> (bool, String) {
        sh(&format!("{} {args}", self.bin.display()))
    }

    /// Start it and wait until it listens.
    pub fn restart_command(&self) -> String {
        format!(
            "{} for i in $(seq 1 100); do bash -c 'exec 3<>/dev/tcp/127.0.0.1/{p}' 2>/dev/null && exit 0; sleep 0.2; done; exit 1",
            self.start_command(),
            p = self.port
        )
    }

    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn process_pattern(&self) -> String {
        format!("tcp://127.0.0.1:{}", self.port)
    }

    pub fn log_path(&self) -> String {
        format!("{}/tansu.log", self.dir.display())
    }

    pub fn wait_up(&self, deadline: Duration) -> Result<Duration, String> {
        wait_until("tansu", deadline, &self.log_path(), || port_open(self.port))
    }
}

impl Drop for Tansu {
    fn drop(&mut self) {
        let _ = sh(&format!("pkill -9 -f -- '{}'", self.process_pattern()));
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A victim the test needs: under `CI` its absence fails the test; by hand it skips
/// with the reason.
pub fn need<T>(what: &str, made: Result<T, String>) -> Option<T> {
    match made {
        Ok(v) => Some(v),
        Err(why) => {
            super::services::unavailable(
                &format!("{what}: {why}"),
                "the test command provisions it; see README",
            );
            None
        }
    }
}

/// A path for logs kept after the test (under the target directory).
pub fn keep_dir(name: &str) -> PathBuf {
    let p = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::create_dir_all(&p);
    p
}

/// A server process of the test's own (nats-server, redis-server) started from a
/// config file in its own directory, killed and removed on drop.
pub struct OwnServer {
    pub port: u16,
    pub dir: PathBuf,
    child: std::process::Child,
}

impl OwnServer {
    /// `program <args>` (`{dir}` in an argument or in `config` names the server's
    /// directory; `config` is written to `{dir}/server.conf`), `files` copied into the
    /// directory first; up when `port` accepts a connection.
    pub fn start(
        program: &str,
        args: &[&str],
        config: &str,
        files: &[&Path],
        port: u16,
    ) -> Result<OwnServer, String> {
        if let Some(m) = missing(&[program]) {
            return Err(m);
        }
        let dir = PathBuf::from(format!("/tmp/crossbench-own-{program}-{port}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        for f in files {
            let name = f.file_name().ok_or("a file with no name")?;
            std::fs::copy(f, dir.join(name)).map_err(|e| format!("{}: {e}", f.display()))?;
        }
        let d = dir.display().to_string();
        std::fs::write(dir.join("server.conf"), config.replace("{dir}", &d))
            .map_err(|e| e.to_string())?;
        let log = std::fs::File::create(dir.join("server.log")).map_err(|e| e.to_string())?;
        let child = Command::new(program)
            .args(args.iter().map(|a| a.replace("{dir}", &d)))
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("{program}: {e}"))?;
        let s = OwnServer { port, dir, child };
        let log = format!("{}/server.log", s.dir.display());
        wait_until(program, UP_DEADLINE, &log, || port_open(port))?;
        Ok(s)
    }

    pub fn log_tail(&self) -> String {
        tail(&format!("{}/server.log", self.dir.display()), 40)
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

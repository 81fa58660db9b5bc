//! A throwaway PostgreSQL server: `initdb` on a temporary directory, `pg_ctl start` on a free
//! port of 127.0.0.1, stopped and removed on drop. The queue's tests, the CLI's tests and the
//! scale simulation run against it: a real server, never a mock.
//!
//! PostgreSQL refuses to run as root; as root the server runs as the `postgres` user (else
//! `nobody`) through `runuser`, owning the directory.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Why the server could not be made, started or stopped.
#[derive(Debug, thiserror::Error)]
pub enum TempDbError {
    #[error(
        "PostgreSQL's server binaries (initdb, pg_ctl) were not found: looked in $CUZK_PG_BINDIR, `pg_config --bindir`, /usr/lib/postgresql/*/bin and PATH. Install them (Debian: apt-get install postgresql)"
    )]
    NoBinaries,
    #[error(
        "running as root, and neither the `postgres` nor the `nobody` user exists to run the server as"
    )]
    NoUser,
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{what} failed ({status}):\n{output}")]
    Command {
        what: String,
        status: std::process::ExitStatus,
        output: String,
    },
}

fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> TempDbError {
    let what = what.into();
    move |source| TempDbError::Io { what, source }
}

/// A directory holding both `initdb` and `pg_ctl`.
fn has_tools(dir: &Path) -> bool {
    dir.join("initdb").is_file() && dir.join("pg_ctl").is_file()
}

/// Where the server binaries are (see [`TempDbError::NoBinaries`] for the order).
pub fn find_bindir() -> Result<PathBuf, TempDbError> {
    if let Some(d) = std::env::var_os("CUZK_PG_BINDIR") {
        let d = PathBuf::from(d);
        return if has_tools(&d) {
            Ok(d)
        } else {
            Err(TempDbError::NoBinaries)
        };
    }
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output()
        && out.status.success()
    {
        let d = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if has_tools(&d) {
            return Ok(d);
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse::<u32>().ok()?;
            Some((v, e.path().join("bin")))
        })
        .filter(|(_, d)| has_tools(d))
        .collect();
    versions.sort();
    if let Some((_, d)) = versions.pop() {
        return Ok(d);
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .find(|d| has_tools(d))
        .ok_or(TempDbError::NoBinaries)
}

fn user_ids(name: &str) -> Option<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() > 3 && f[0] == name).then(|| Some((f[2].parse().ok()?, f[3].parse().ok()?)))?
    })
}

/// A running server; dropping it stops the server (immediate mode) and removes its files.
#[derive(Debug)]
pub struct TempPostgres {
    bindir: PathBuf,
    dir: PathBuf,
    port: u16,
    /// The user the server runs as, when this process is root.
    run_as: Option<String>,
}

impl TempPostgres {
    /// Makes and starts a server with the default settings.
    pub fn start() -> Result<Self, TempDbError> {
        Self::start_with(&[])
    }

    /// Makes and starts a server; `settings` are extra `-c name=value` options.
    pub fn start_with(settings: &[&str]) -> Result<Self, TempDbError> {
        Self::make(settings, None)
    }

    /// Makes and starts a server that also accepts TLS (`ssl = on`) with this certificate and
    /// its key (PEM).
    pub fn start_with_tls(cert_pem: &str, key_pem: &str) -> Result<Self, TempDbError> {
        Self::make(&[], Some((cert_pem, key_pem)))
    }

    fn make(settings: &[&str], tls: Option<(&str, &str)>) -> Result<Self, TempDbError> {
        let bindir = find_bindir()?;
        let root = std::fs::metadata("/proc/self")
            .map(|m| m.uid() == 0)
            .map_err(io_err("stat /proc/self"))?;
        let run_as = if root {
            let user = ["postgres", "nobody"]
                .into_iter()
                .find(|u| user_ids(u).is_some())
                .ok_or(TempDbError::NoUser)?;
            Some(user.to_owned())
        } else {
            None
        };
        let dir = std::env::temp_dir().join(format!(
            "cuzk-pg-{}-{:08x}",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::create_dir_all(&dir).map_err(io_err(format!("create {}", dir.display())))?;
        let mut tls_conf = String::new();
        // What the server's user must own.
        let mut owned = vec![dir.clone()];
        if let Some((cert, key)) = tls {
            // The server refuses a key file that others may read.
            for (name, pem, mode) in [("server.crt", cert, 0o644), ("server.key", key, 0o600)] {
                let path = dir.join(name);
                std::fs::write(&path, pem).map_err(io_err(format!("write {}", path.display())))?;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
                    .map_err(io_err(format!("chmod {}", path.display())))?;
                owned.push(path);
            }
            tls_conf = format!(
                "ssl = on\nssl_cert_file = '{0}/server.crt'\nssl_key_file = '{0}/server.key'\n",
                dir.display()
            );
        }
        if let Some(u) = &run_as {
            let (uid, gid) = user_ids(u).ok_or(TempDbError::NoUser)?;
            for path in &owned {
                std::os::unix::fs::chown(path, Some(uid), Some(gid))
                    .map_err(io_err(format!("chown {} to {u}", path.display())))?;
            }
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(io_err("find a free port"))?
            .port();
        let me = Self {
            bindir,
            dir,
            port,
            run_as,
        };
        let data = me.data();
        me.run(
            "initdb",
            &[
                "-D",
                &data,
                "-U",
                "cuzk",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        )?;
        // Append the options to postgresql.conf, so a restart with plain `pg_ctl start` keeps them.
        let mut conf = format!(
            "\nport = {}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\nmax_connections = 200\n",
            me.port,
            me.dir.display()
        );
        for s in settings {
            conf.push_str(s);
            conf.push('\n');
        }
        conf.push_str(&tls_conf);
        let conf_path = me.dir.join("data/postgresql.conf");
        let mut text = std::fs::read_to_string(&conf_path)
            .map_err(io_err(format!("read {}", conf_path.display())))?;
        text.push_str(&conf);
        std::fs::write(&conf_path, text)
            .map_err(io_err(format!("write {}", conf_path.display())))?;
        me.start_again()?;
        Ok(me)
    }

    fn data(&self) -> String {
        self.dir.join("data").display().to_string()
    }

    /// Runs a server tool as the server's user.
    fn run(&self, tool: &str, args: &[&str]) -> Result<(), TempDbError> {
        let exe = self.bindir.join(tool);
        let mut cmd = match &self.run_as {
            Some(u) => {
                let mut c = Command::new("runuser");
                c.args(["-u", u, "--"]).arg(&exe);
                c
            }
            None => Command::new(&exe),
        };
        // The server's user may not be able to enter this process's working directory.
        cmd.args(args).current_dir(&self.dir);
        let what = format!("{tool} {}", args.join(" "));
        let out = cmd.output().map_err(io_err(what.clone()))?;
        if !out.status.success() {
            let log = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
            return Err(TempDbError::Command {
                what,
                status: out.status,
                output: format!(
                    "{}{}\nserver log:\n{log}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ),
            });
        }
        Ok(())
    }

    /// The URL of the server's `postgres` database, as the `cuzk` superuser.
    pub fn url(&self) -> String {
        format!("postgres://cuzk@127.0.0.1:{}/postgres", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Starts the server (again) on the same port and data, waiting until it accepts.
    pub fn start_again(&self) -> Result<(), TempDbError> {
        let data = self.data();
        let log = self.dir.join("server.log").display().to_string();
        self.run(
            "pg_ctl",
            &["-D", &data, "-l", &log, "-w", "-t", "60", "start"],
        )
    }

    /// Stops the server (fast mode: open connections are closed).
    pub fn stop(&self) -> Result<(), TempDbError> {
        let data = self.data();
        self.run("pg_ctl", &["-D", &data, "-m", "fast", "-w", "stop"])
    }
}

impl Drop for TempPostgres {
    fn drop(&mut self) {
        let data = self.data();
        let _ = self.run("pg_ctl", &["-D", &data, "-m", "immediate", "-w", "stop"]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

//! A redis-server of the test's own, on a free loopback port, so that stopping, pausing or
//! blocking it disturbs no other test.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct OwnRedis {
    pub port: u16,
    child: Option<Child>,
}

impl OwnRedis {
    pub fn start() -> Option<Self> {
        if Command::new("redis-server")
            .arg("--version")
            .output()
            .is_err()
        {
            assert!(
                std::env::var_os("CI").is_none(),
                "redis-server is not installed (scripts/redis start)"
            );
            eprintln!("redis-server is not installed: the fault tests are skipped");
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        // A directory of its own for a snapshot a test asks for (`SAVE`), loaded again when
        // the server restarts; none is written otherwise (`--save ""`).
        let _ = std::fs::remove_dir_all(dir(port));
        std::fs::create_dir_all(dir(port)).unwrap();
        let mut r = Self { port, child: None };
        r.up();
        Some(r)
    }

    pub fn up(&mut self) {
        let child = Command::new("redis-server")
            .args([
                "--bind",
                "127.0.0.1",
                "--port",
                &self.port.to_string(),
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .args(["--enable-debug-command", "local"])
            .arg("--dir")
            .arg(dir(self.port))
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn down(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        self.down();
        let _ = std::fs::remove_dir_all(dir(self.port));
    }
}

fn dir(port: u16) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("mrtr-gate-own-redis-{port}"))
}

//! `dsh-supervisor world`, the real binary as the current user: one
//! resident process answering operations requested on its stdin, several
//! at once, each within its window of credit, a cancelled one stopped;
//! it ends on stdin's end and when its lease runs out without input.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dsh_plugin_api::fs::{ReadManyLimits, WalkEvent, WalkSpec};
use dsh_supervisor::wire::{self, Identity};
use dsh_supervisor::world::{self as frames, WorldOp, WorldRequest, WorldStart};

const HELPER: &str = env!("CARGO_BIN_EXE_dsh-supervisor");

/// A running `world` and everything it wrote so far.
struct World {
    child: Child,
    stdin: Option<ChildStdin>,
    out: Arc<Mutex<Vec<u8>>>,
}

impl World {
    fn start(lease: Duration) -> World {
        let identity = Identity {
            uid: rustix::process::geteuid().as_raw(),
            gid: rustix::process::getegid().as_raw(),
            groups: Vec::new(),
        };
        let start = WorldStart { identity, lease };
        let mut child = Command::new(HELPER)
            .arg("world")
            .env(wire::REQUEST_ENV, wire::base64_encode(&start.encode()))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the supervisor");
        let mut stdout = child.stdout.take().expect("stdout");
        let out = Arc::new(Mutex::new(Vec::new()));
        let sink = out.clone();
        std::thread::spawn(move || {
            let mut chunk = [0u8; 8192];
            while let Ok(read @ 1..) = stdout.read(&mut chunk) {
                sink.lock().unwrap().extend_from_slice(&chunk[..read]);
            }
        });
        World {
            stdin: child.stdin.take(),
            child,
            out,
        }
    }

    fn send(&mut self, tag: u8, id: u64, body: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin
            .write_all(&frames::frame(tag, id, body))
            .expect("write a frame");
    }

    fn request(&mut self, id: u64, cwd: &Path, op: WorldOp) {
        let request = WorldRequest {
            cwd: cwd.to_string_lossy().into_owned(),
            op,
        };
        self.send(frames::REQUEST, id, &request.encode());
    }

    /// The frames written so far, as (id, tag, body).
    fn frames(&self) -> Vec<(u64, u8, Vec<u8>)> {
        let out = self.out.lock().unwrap();
        let (whole, _) = frames::complete_frames(&out, usize::MAX).expect("frames");
        whole
            .iter()
            .map(|frame| {
                let (id, body) = frames::split_id(frame.payload).expect("an id");
                (id, frame.tag, body.to_vec())
            })
            .collect()
    }

    /// Waits (at most 10 s) until `done` holds of the frames so far.
    fn until(&self, what: &str, done: impl Fn(&[(u64, u8, Vec<u8>)]) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done(&self.frames()) {
            assert!(Instant::now() < deadline, "no {what} within 10 s");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn threads(&self) -> usize {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("the process status");
        status
            .lines()
            .find_map(|line| line.strip_prefix("Threads:"))
            .and_then(|count| count.trim().parse().ok())
            .expect("a thread count")
    }

    /// Waits (at most `limit`) for the process to end; its exit code.
    fn ended_within(&mut self, limit: Duration) -> Option<i32> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status.code();
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn walk(root: &Path) -> WorldOp {
    WorldOp::Walk {
        root: root.to_string_lossy().into_owned(),
        spec: WalkSpec {
            max_depth: 8,
            max_entries: 1_000_000,
            globs: Vec::new(),
            gitignore: false,
            beneath: false,
        },
    }
}

fn walk_ended(frames: &[(u64, u8, Vec<u8>)], id: u64) -> bool {
    frames.iter().any(|(of, tag, body)| {
        *of == id
            && *tag == frames::EVENT
            && matches!(frames::decode_walk_event(body), Ok(WalkEvent::End(_)))
    })
}

/// A tree whose walk answers far more than one window.
fn big_tree(root: &Path) {
    for dir in 0..20 {
        let dir = root.join(format!("directory-with-a-long-name-{dir:03}"));
        std::fs::create_dir(&dir).expect("mkdir");
        for file in 0..1000 {
            std::fs::write(dir.join(format!("file-with-a-long-name-{file:05}.txt")), "")
                .expect("write");
        }
    }
}

#[test]
fn one_process_answers_several_operations_at_once_by_id() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("d")).expect("mkdir");
    std::fs::write(dir.path().join("d/a.txt"), "alpha\n").expect("write");
    let mut world = World::start(frames::LEASE);
    world.request(7, dir.path(), walk(Path::new("d")));
    world.request(
        3,
        dir.path(),
        WorldOp::ReadMany {
            paths: vec!["d/a.txt".into(), "missing".into()],
            limits: ReadManyLimits {
                max_file_bytes: 100,
                max_total_bytes: 100,
                beneath: None,
            },
        },
    );
    world.until("both answers", |frames| {
        walk_ended(frames, 7)
            && frames
                .iter()
                .any(|(id, tag, _)| *id == 3 && *tag == frames::ITEMS)
    });
    let frames = world.frames();
    let entries: Vec<String> = frames
        .iter()
        .filter(|(id, _, _)| *id == 7)
        .filter_map(|(_, _, body)| match frames::decode_walk_event(body) {
            Ok(WalkEvent::Entry(entry)) => Some(entry.relative),
            _ => None,
        })
        .collect();
    assert_eq!(entries, ["a.txt"]);
    let (_, _, items) = frames
        .iter()
        .find(|(id, tag, _)| *id == 3 && *tag == frames::ITEMS)
        .expect("items");
    let items = frames::decode_items(items).expect("decode the items");
    assert_eq!(
        items[0].result.as_ref().expect("read").text.as_str(),
        "alpha\n"
    );
    assert!(items[1].result.is_err(), "{items:?}");
    assert!(
        frames.iter().all(|(id, _, _)| *id == 3 || *id == 7),
        "only the requested ids are answered"
    );

    // A request after those is answered by the same process; an error
    // ends only its own operation.
    world.request(9, dir.path(), walk(Path::new("nowhere")));
    world.until("the error", |frames| {
        frames
            .iter()
            .any(|(id, tag, _)| *id == 9 && *tag == frames::ERROR)
    });
    world.request(10, dir.path(), walk(Path::new("d")));
    world.until("another walk", |frames| walk_ended(frames, 10));

    // stdin's end ends it.
    world.stdin = None;
    assert_eq!(world.ended_within(Duration::from_secs(5)), Some(0));
}

#[test]
fn an_operation_waits_for_credit_and_a_cancelled_one_stops() {
    let dir = tempfile::tempdir().expect("tempdir");
    big_tree(dir.path());
    let mut world = World::start(frames::LEASE);
    world.request(1, dir.path(), walk(dir.path()));
    world.until("a window's worth", |frames| {
        frames.iter().map(|(_, _, body)| body.len()).sum::<usize>() > 512 * 1024
    });
    std::thread::sleep(Duration::from_millis(300));
    let written = world.out.lock().unwrap().len() as u64;
    assert!(
        written <= frames::WINDOW + 64 * 1024,
        "{written} bytes written without credit"
    );
    assert!(!walk_ended(&world.frames(), 1), "the walk is held back");
    assert_eq!(world.threads(), 2, "the walk's thread waits for credit");

    // Credit lets it go on.
    world.send(frames::CREDIT, 1, &written.to_le_bytes());
    world.until("more after the credit", |_| {
        world.out.lock().unwrap().len() as u64 > written + 512 * 1024
    });
    assert!(
        !walk_ended(&world.frames(), 1),
        "the walk is held back again"
    );

    // Cancelled, it stops: its thread ends without an end of the walk.
    world.send(frames::CANCEL, 1, &[]);
    let deadline = Instant::now() + Duration::from_secs(5);
    while world.threads() > 1 {
        assert!(Instant::now() < deadline, "the cancelled walk runs on");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        !walk_ended(&world.frames(), 1),
        "a cancelled walk says no more"
    );

    // A walk whose host credits as it reads ends.
    world.request(2, dir.path(), walk(dir.path()));
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut credited = 0;
    while !walk_ended(&world.frames(), 2) {
        assert!(Instant::now() < deadline, "the credited walk did not end");
        let taken: usize = world
            .frames()
            .iter()
            .filter(|(id, _, _)| *id == 2)
            .map(|(_, _, body)| wire::HEADER + 8 + body.len())
            .sum();
        if taken > credited {
            world.send(
                frames::CREDIT,
                2,
                &((taken - credited) as u64).to_le_bytes(),
            );
            credited = taken;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let entries = world
        .frames()
        .iter()
        .filter(|(id, tag, _)| *id == 2 && *tag == frames::EVENT)
        .count();
    assert_eq!(entries, 20 * 1001 + 1, "every entry and the end");
}

#[test]
fn without_input_it_ends_when_its_lease_runs_out() {
    let lease = Duration::from_millis(400);
    let mut world = World::start(lease);
    // Pings keep it.
    for _ in 0..8 {
        std::thread::sleep(lease / 4);
        let stdin = world.stdin.as_mut().expect("stdin open");
        let mut ping = [0u8; wire::HEADER];
        wire::frame_header(&mut ping, frames::PING, 0);
        stdin.write_all(&ping).expect("ping");
    }
    assert_eq!(world.ended_within(Duration::ZERO), None, "pinged, it lives");
    // Silence, with stdin still open (a host that died while envd holds
    // the pipe), ends it.
    assert_eq!(world.ended_within(lease * 5), Some(0));
    assert!(world.stdin.is_some());
}

/// How many of the process's descriptors lead to a deleted file.
fn deleted_files_open(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("the process's descriptors")
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .filter(|target| target.to_string_lossy().ends_with(" (deleted)"))
        .count()
}

#[test]
fn a_hold_keeps_a_replaced_file_until_cancelled_and_refuses_a_missing_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("target"), b"old content").expect("the target");
    std::fs::write(dir.path().join("staged"), b"new content").expect("the staged file");
    let mut world = World::start(frames::LEASE);
    let pid = world.child.id();
    world.request(
        1,
        dir.path(),
        WorldOp::Hold {
            path: "target".into(),
        },
    );
    world.until("the hold", |frames| {
        frames
            .iter()
            .any(|(id, tag, _)| *id == 1 && *tag == frames::HELD)
    });
    // Replaced while held: the old file lives on in the supervisor.
    std::fs::rename(dir.path().join("staged"), dir.path().join("target")).expect("rename");
    assert_eq!(deleted_files_open(pid), 1, "the replaced file is held");
    assert_eq!(world.threads(), 2, "the hold waits on its own thread");

    // Cancelled, it lets go: the file is freed and the thread ends.
    world.send(frames::CANCEL, 1, &[]);
    let deadline = Instant::now() + Duration::from_secs(5);
    while world.threads() > 1 || deleted_files_open(pid) > 0 {
        assert!(Instant::now() < deadline, "the cancelled hold goes on");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        std::fs::read(dir.path().join("target")).expect("read"),
        b"new content"
    );

    // Nothing to hold: the operation's error, and no thread left.
    world.request(
        2,
        dir.path(),
        WorldOp::Hold {
            path: "absent".into(),
        },
    );
    world.until("the refusal", |frames| {
        frames
            .iter()
            .any(|(id, tag, _)| *id == 2 && *tag == frames::ERROR)
    });
    let error = world
        .frames()
        .into_iter()
        .find(|(id, tag, _)| *id == 2 && *tag == frames::ERROR)
        .map(|(_, _, body)| frames::decode_error(&body).expect("an error"))
        .expect("the error frame");
    assert_eq!(error.kind(), dsh_plugin_api::ErrorKind::NotFound, "{error}");
    assert!(error.message().contains("absent"), "{error}");
}

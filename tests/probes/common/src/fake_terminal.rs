//! Fake terminals.
//!
//! The output starts with the argv joined by spaces and `\r\n`. Input is
//! echoed back; Ctrl-C (`0x03`) echoes `^C\r\n` and the program keeps
//! running (the foreground job was interrupted); Ctrl-D (`0x04`) makes it
//! exit with code 0. `resize` prints `size <cols>x<rows>\r\n`, `signal`
//! prints `signal <n>\r\n` and ends the program for HUP, INT, TERM and
//! KILL. `foreground_pgid` is the pid. `terminate` ends it with SIGHUP.
//! Output is unbounded (buffered while the consumer is paused) and ends
//! when the program does.

use std::sync::{Mutex, PoisonError};

use dsh_plugin_api::stream::ByteStream;
use dsh_plugin_api::subprocess::{ExitStatus, Signal, Terminal, TerminalSpec};
use dsh_plugin_api::{Bytes, Error, Result, async_trait};
use tokio::sync::mpsc;

use crate::exit::Exit;

/// A fake terminal.
pub struct FakeTerminal {
    pid: u32,
    output: Mutex<Option<mpsc::UnboundedSender<Bytes>>>,
    stream: Mutex<Option<ByteStream>>,
    status: Exit,
}

impl FakeTerminal {
    pub fn start(pid: u32, spec: &TerminalSpec) -> FakeTerminal {
        let (sender, receiver) = mpsc::unbounded_channel::<Bytes>();
        let stream: ByteStream = Box::pin(futures::stream::unfold(
            receiver,
            |mut receiver| async move { receiver.recv().await.map(|chunk| (Ok(chunk), receiver)) },
        ));
        let _ = sender.send(format!("{}\r\n", spec.argv.join(" ")).into());
        FakeTerminal {
            pid,
            output: Mutex::new(Some(sender)),
            stream: Mutex::new(Some(stream)),
            status: Exit::default(),
        }
    }

    fn print(&self, operation: &str, text: Bytes) -> Result<()> {
        let output = self.output.lock().unwrap_or_else(PoisonError::into_inner);
        match output.as_ref() {
            Some(sender) => {
                let _ = sender.send(text);
                Ok(())
            }
            None => Err(
                Error::closed(format!("{operation}: the terminal's program has exited"))
                    .with_subject(self.pid.to_string()),
            ),
        }
    }

    /// Ends the program (once) and closes its output.
    pub fn end(&self, status: ExitStatus) {
        self.status.settle(status);
        self.output
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }
}

#[async_trait]
impl Terminal for FakeTerminal {
    fn pid(&self) -> u32 {
        self.pid
    }

    fn take_output(&self) -> Option<ByteStream> {
        self.stream
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    async fn write(&self, data: Bytes) -> Result<()> {
        let interrupt = data.contains(&0x03);
        let eof = data.contains(&0x04);
        self.print("write", data)?;
        if interrupt {
            self.print("write", Bytes::from_static(b"^C\r\n"))?;
        }
        if eof {
            self.end(ExitStatus {
                code: Some(0),
                signal: None,
                timed_out: false,
            });
        }
        Ok(())
    }

    async fn resize(&self, cols: u16, rows: u16) -> Result<()> {
        if cols == 0 || rows == 0 {
            return Err(Error::invalid_input(format!(
                "resize: {cols}x{rows} must be at least 1x1"
            )));
        }
        self.print("resize", Bytes::from(format!("size {cols}x{rows}\r\n")))
    }

    async fn foreground_pgid(&self) -> Result<u32> {
        Ok(self.pid)
    }

    async fn signal(&self, signal: Signal) -> Result<()> {
        self.print("signal", Bytes::from(format!("signal {}\r\n", signal.0)))?;
        if [Signal::HUP, Signal::INT, Signal::TERM, Signal::KILL].contains(&signal) {
            self.end(ExitStatus {
                code: None,
                signal: Some(signal),
                timed_out: false,
            });
        }
        Ok(())
    }

    async fn terminate(&self) -> Result<()> {
        self.end(ExitStatus {
            code: None,
            signal: Some(Signal::HUP),
            timed_out: false,
        });
        Ok(())
    }

    async fn wait(&self) -> Result<ExitStatus> {
        self.status.wait().await
    }
}

//! The control connection driven through the sans-IO `ClientSession`: what is written, what
//! is read with the session's deadlines, and the session's events, for every transport.

use std::time::Duration;

use tcptune_iperf3::session::{ClientEvent, ClientSession, SessionError};
use tcptune_iperf3::Results;
use tcptune_model::Dur;

use crate::control::{Clock, Control, Got};
use crate::TestError;

fn session_err(e: SessionError) -> TestError {
    TestError::Session(e)
}

/// The control connection, its session and the test clock.
pub struct Link {
    /// The control connection.
    pub ctl: Control,
    /// The control protocol's state.
    pub s: ClientSession,
    /// The test clock.
    pub clock: Clock,
}

impl Link {
    /// The test clock now.
    pub fn now(&self) -> Dur {
        self.clock.now()
    }

    fn flush(&mut self) -> Result<(), TestError> {
        self.ctl
            .write(&self.s.take_output())
            .map_err(|e| TestError::io("writing to the control connection", e))
    }

    /// Feeds whatever arrives on the control connection until `want` says stop.
    pub fn pump(
        &mut self,
        mut want: impl FnMut(&ClientEvent) -> bool,
    ) -> Result<Vec<ClientEvent>, TestError> {
        let mut seen = Vec::new();
        loop {
            self.flush()?;
            match self
                .ctl
                .read(&self.clock, self.s.deadline(), Duration::from_secs(1))
                .map_err(|e| TestError::io("reading the control connection", e))?
            {
                Got::Eof => {
                    self.s.handle_eof().map_err(session_err)?;
                    return Err(TestError::Session(SessionError::Closed {
                        phase: "talking to the server",
                    }));
                }
                Got::Nothing => self.s.poll(self.clock.now()).map_err(session_err)?,
                Got::Data(n) => {
                    let ev = self
                        .s
                        .handle_input(self.ctl.data(n), self.clock.now())
                        .map_err(session_err)?;
                    let done = ev.iter().any(&mut want);
                    seen.extend(ev);
                    if done {
                        self.flush()?;
                        return Ok(seen);
                    }
                }
            }
        }
    }

    /// Waits for CREATE_STREAMS: how many streams to open, and on how many the client sends.
    pub fn create_streams(&mut self) -> Result<(u32, u32), TestError> {
        let ev = self.pump(|e| matches!(e, ClientEvent::CreateStreams { .. }))?;
        ev.iter()
            .find_map(|e| match e {
                ClientEvent::CreateStreams {
                    count,
                    client_sends,
                } => Some((*count, *client_sends)),
                _ => None,
            })
            .ok_or(TestError::Session(SessionError::Ended))
    }

    /// Waits for TEST_RUNNING.
    pub fn running(&mut self) -> Result<(), TestError> {
        self.pump(|e| matches!(e, ClientEvent::TestRunning))
            .map(drop)
    }

    /// Tells the server at once that the test ends (iperf3 does on a failure or Ctrl-C), so
    /// it does not wait for streams or data.
    pub fn terminate(&mut self) {
        self.s.terminate();
        let _ = self.ctl.write(&self.s.take_output());
    }

    /// While the data flows: waits at most `wait` for the control connection, where anything
    /// now is the server ending the test early.
    pub fn watch(&mut self, wait: Duration) -> Result<(), TestError> {
        let ready = tcptune_os::poll::wait_readable(
            std::os::fd::AsFd::as_fd(&self.ctl.sock),
            wait.max(Duration::from_millis(1)),
        )
        .map_err(|e| TestError::io("waiting on the control connection", e))?;
        if ready {
            match self
                .ctl
                .read(&self.clock, None, Duration::from_millis(1))
                .map_err(|e| TestError::io("reading the control connection", e))?
            {
                Got::Eof => self.s.handle_eof().map_err(session_err)?,
                Got::Data(n) => {
                    self.s
                        .handle_input(self.ctl.data(n), self.clock.now())
                        .map_err(session_err)?;
                }
                Got::Nothing => {}
            }
        }
        Ok(())
    }

    /// TEST_END, then waits for EXCHANGE_RESULTS.
    pub fn end_test(&mut self) -> Result<(), TestError> {
        self.s.end_test(self.clock.now()).map_err(session_err)?;
        self.pump(|e| matches!(e, ClientEvent::ExchangeResults))
            .map(drop)
    }

    /// Sends our results and returns the server's, once the session is done.
    pub fn exchange(&mut self, own: &Results) -> Result<Results, TestError> {
        self.s
            .send_results(own, self.clock.now())
            .map_err(session_err)?;
        let ev = self.pump(|e| matches!(e, ClientEvent::Done))?;
        ev.into_iter()
            .find_map(|e| match e {
                ClientEvent::ServerResults(r) => Some(*r),
                _ => None,
            })
            .ok_or(TestError::Session(SessionError::Ended))
    }
}

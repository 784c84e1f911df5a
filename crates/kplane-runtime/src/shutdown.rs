//! Graceful shutdown: SIGINT / SIGTERM (or a programmatic trigger) fans out to every task.

use tokio::sync::watch;

/// A cloneable shutdown signal.
#[derive(Clone, Debug)]
pub struct Shutdown {
    tx: watch::Sender<bool>,
    rx: watch::Receiver<bool>,
}

impl Default for Shutdown {
    fn default() -> Self {
        Self::new()
    }
}

impl Shutdown {
    pub fn new() -> Self {
        let (tx, rx) = watch::channel(false);
        Self { tx, rx }
    }

    /// Asks everything holding a clone to stop.
    pub fn trigger(&self) {
        self.tx.send_replace(true);
    }

    pub fn is_triggered(&self) -> bool {
        *self.rx.borrow()
    }

    /// Resolves once shutdown has been triggered.
    pub async fn wait(&self) {
        let mut rx = self.rx.clone();
        // An error means every sender is gone, which also means stop.
        let _ = rx.wait_for(|stop| *stop).await;
    }

    /// Triggers on SIGINT or SIGTERM. Call once, from the process's main task.
    pub fn on_signals(&self) {
        let this = self.clone();
        tokio::spawn(async move {
            wait_for_signal().await;
            tracing::info!("shutdown signal received");
            this.trigger();
        });
    }
}

async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM; only SIGINT stops");
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn trigger_wakes_every_clone() {
        let s = Shutdown::new();
        let c = s.clone();
        let waiter = tokio::spawn(async move { c.wait().await });
        s.trigger();
        waiter.await.unwrap();
        assert!(s.is_triggered());
    }
}

//! The agent cards this gateway serves (the public card, the extended card, each upstream
//! agent's rewritten card): built at start ([`build`]), rebuilt whenever an agent reports a
//! card or health change ([`Publisher::start`], a loop the application context joins at
//! shutdown), and published as one set that readers take whole ([`CardView`]). The domain
//! service gets the view (GetExtendedAgentCard, the catalogue); the bindings serve the
//! well-known documents from the application context's.

mod build;

use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use build::Builder;

use crate::service::{CardView, Cards};

/// The card loop's side: the builder and where each new set goes.
pub struct Publisher {
    builder: Builder,
    published: watch::Sender<Arc<Cards>>,
}

/// Builds the first set of cards; returns what rebuilds them and the view readers hold.
pub fn build(builder: Builder) -> (Publisher, CardView) {
    let (published, view) = watch::channel(Arc::new(builder.build(None)));
    (Publisher { builder, published }, CardView::new(view))
}

impl Publisher {
    /// Rebuilds the cards whenever an agent reports a card or health change, until shutdown.
    /// Started before the upstream agents are, so that it sees their first card change. Must be
    /// called inside a tokio runtime.
    pub fn start(self, shutdown: CancellationToken) -> JoinHandle<()> {
        let mut changes = self.builder.agents().changes();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    changed = changes.changed() => if changed.is_err() { return },
                }
                let previous = self.published.borrow().clone();
                let cards = self.builder.build(Some(&previous));
                self.published.send_replace(Arc::new(cards));
            }
        })
    }
}

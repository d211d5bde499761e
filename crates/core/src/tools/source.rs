//! Tools a feature owns and offers as they are now, beside the built-in ones: the skills'
//! `use_skill` (offered while some skill is on demand), the MCP servers' tools (while their
//! servers are ready). The registry asks a source for its tools and knows nothing else of it;
//! each tool runs its own calls.

use std::sync::Arc;

use super::Tool;
use std::any::Any;

pub trait ToolSource: Any + Send + Sync {
    /// The tools the source has now (a call to one is answered by the tool itself).
    fn tools(&self) -> Vec<Arc<dyn Tool>>;

    /// Whether the model is shown them now; a call to one still runs, and says why it cannot
    /// help.
    fn offered(&self) -> bool {
        true
    }
}

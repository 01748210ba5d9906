//! The listener (to come): one hyper HTTP/1 connection task per accepted socket; POST, GET
//! and DELETE routed, anything else 405; `Origin` checked; body caps; a drop guard that ends
//! a binding `cancelled` when its client disconnects mid-call.

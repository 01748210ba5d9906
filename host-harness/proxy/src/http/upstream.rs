//! The upstream client (to come): pooled connections to the configured URL only, redirects
//! never followed, identity encoding (the gate judges decoded text), the kinds of answer
//! told apart (JSON, SSE, 202/204, an HTTP error).

//! The MCP request headers (to come): `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name`
//! checked against the body (the base64 sentinel decoded, a header given twice refused),
//! `Mcp-Param-*` and `Mcp-Session-Id` passed on, hop-by-hop headers not copied.

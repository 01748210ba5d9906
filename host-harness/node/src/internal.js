// Not API: what the package's own tests reach inside for (`mrtr-gate/internal`), so they run
// against an installed copy as they do against this folder. It may change in any release.
export { instantiate } from "../gen/gate.js";
export { __testImports } from "./index.js";
export { canonical, responsesSha256 } from "./canonical.js";
export { StreamRefused, readAnswer, reframe } from "./sdk-framing.js";
export { componentLoader, coreModuleName, coreModules, SHIPPED_SHA256 } from "./component.js";

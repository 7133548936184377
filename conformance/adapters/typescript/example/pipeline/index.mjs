export { ToolPipeline } from './pipeline.mjs';
export { RUN_CODE, ToolCallError, bindingsFor, programText, sourceProgram } from './code-mode.mjs';
export { AgentFs, MemoryDisk } from './fs.mjs';
export { HarnessError, failure, fromThrown, renderValue, success, text } from './results.mjs';
export { SessionLog } from './session.mjs';
export { Waterfall } from './waterfall.mjs';

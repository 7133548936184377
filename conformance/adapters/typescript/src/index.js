// tep-adapter: write a `tep` adapter for a JavaScript/TypeScript tool-execution pipeline as glue.
export { serve, serveStreams, isMain, claimStdout, runScenario, readyMessage, Skip, PROTOCOL_VERSION } from './protocol.js';
export { runLocal, findTep, loadScenario } from './local.js';
export { Scenario, actionFor, subCallsOf, subCallId, RUN_CODE } from './scenario.js';
export {
  Recorder,
  defaultIdentify,
  defaultToResult,
  defaultReadPreDecision,
  defaultReadPostDecision,
  rejectionFields,
} from './recorder.js';
export { Scripts, programContent, programSource } from './interpret.js';
export { encode, EncodeError } from './json.js';
export {
  textBlock,
  contentText,
  render,
  failure,
  timeoutResult,
  messageOf,
  ScriptError,
  CancelledError,
} from './results.js';

'use strict';
// One invocation of a Node.js Lambda function, as Lambda's Node.js runtime (its runtime interface
// client) runs it: load the module the handler names from the task root, call the handler with the
// event and a context, report the result or the error. Started by local_aws/awslambda/nodejs.py in
// a process of its own, which ends with the invocation (Lambda freezes its environment there).
//
// What Lambda's runtime does and this file does too: console output as log events
// (`<time>\t<request id>\t<LEVEL>\t<message>`, a multi-line message kept as one event), the
// errors Lambda reports (Runtime.ImportModuleError, Runtime.HandlerNotFound,
// Runtime.UserCodeSyntaxError, a handler's own error), async and callback handlers.
// What this machine needs and Lambda does not: TLS connections to the hosts LOCAL_LAMBDA_ROUTES matches
// (those of CloudFormation's response URLs) go to the local AWS, which answers for them, in plain TCP.

const fs = require('fs');
const net = require('net');
const path = require('path');
const https = require('https');
const util = require('util');
const { pathToFileURL } = require('url');

const own = (name) => {
  const value = process.env[name];
  delete process.env[name]; // the handler sees Lambda's environment only
  return value;
};
const EVENT = own('LOCAL_LAMBDA_EVENT');
const RESULT = own('LOCAL_LAMBDA_RESULT');
const REQUEST_ID = own('LOCAL_LAMBDA_REQUEST_ID');
const DEADLINE_MS = Number(own('LOCAL_LAMBDA_DEADLINE_MS'));
const INVOKED_ARN = own('LOCAL_LAMBDA_INVOKED_ARN');
// [[host pattern, "127.0.0.1:<port>"], ...]
const ROUTES = JSON.parse(own('LOCAL_LAMBDA_ROUTES') || '[]').map(([pattern, to]) => [new RegExp(pattern), to]);

// --- The network: a routed host is served by the local AWS ---------------------------------------

const tlsConnection = https.Agent.prototype.createConnection;
https.Agent.prototype.createConnection = function createConnection(options, callback) {
  const host = options.host || options.hostname || '';
  const route = ROUTES.find(([pattern]) => pattern.test(host));
  if (route === undefined) return tlsConnection.call(this, options, callback);
  const [address, port] = route[1].split(':');
  return net.connect({ host: address, port: Number(port) });
};

// --- Logs: what Lambda's runtime writes for console output ---------------------------------------

let currentRequestId = 'undefined'; // Lambda's own text for output outside an invocation
function emit(level, args) {
  const message = util.format(...args).replace(/\n/g, '\r');
  process.stdout.write(`${new Date().toISOString()}\t${currentRequestId}\t${level}\t${message}\n`);
}
for (const [method, level] of [['log', 'INFO'], ['info', 'INFO'], ['warn', 'WARN'], ['error', 'ERROR'],
  ['debug', 'DEBUG'], ['trace', 'TRACE']]) {
  console[method] = (...args) => emit(level, args);
}

function described(error, type) {
  const err = error instanceof Error ? error : new Error(String(error));
  return {
    errorType: type || err.name || 'Error',
    errorMessage: err.message,
    trace: String(err.stack || '').split('\n'),
  };
}

let finished = false;
function finish(outcome) {
  if (finished) return;
  finished = true;
  fs.writeFileSync(RESULT, JSON.stringify(outcome));
  process.exit(0);
}

function fail(error, type, phase) {
  const d = described(error, type);
  const label = phase === 'init' ? 'Uncaught Exception' : 'Invoke Error';
  emit('ERROR', [`${label} \t${JSON.stringify({ errorType: d.errorType, errorMessage: d.errorMessage, stack: d.trace })}`]);
  finish({ ok: false, phase, ...d });
}

// --- The handler: Lambda's UserFunction.load --------------------------------------------------------

class ImportModuleError extends Error {
  constructor(message) {
    super(message);
    this.name = 'Runtime.ImportModuleError';
  }
}

async function load(taskRoot, handlerString) {
  const base = path.basename(handlerString);
  const moduleRoot = handlerString.slice(0, handlerString.length - base.length);
  const match = base.match(/^([^.]*)\.(.*)$/);
  if (!match) throw Object.assign(new Error(`Bad handler ${handlerString}`), { type: 'Runtime.MalformedHandlerName' });
  const [, moduleName, handlerPath] = match;
  const stem = path.resolve(taskRoot, moduleRoot, moduleName);
  let module;
  const file = ['.js', '.mjs', '.cjs'].map((ext) => stem + ext).find((f) => fs.existsSync(f));
  try {
    if (file === undefined) {
      // Lambda then resolves the name as node does (node_modules, NODE_PATH)
      let resolved;
      try {
        resolved = require.resolve(moduleName, { paths: [taskRoot, path.resolve(taskRoot, moduleRoot)] });
      } catch (e) {
        throw new ImportModuleError(`Error: Cannot find module '${moduleName}'\nRequire stack:\n- ${__filename}`);
      }
      module = require(resolved);
    } else if (file.endsWith('.mjs')) {
      module = await import(pathToFileURL(file).href);
    } else {
      try {
        module = require(file);
      } catch (e) {
        if (e.code !== 'ERR_REQUIRE_ESM') throw e;
        module = await import(pathToFileURL(file).href);
      }
    }
  } catch (e) {
    if (e instanceof ImportModuleError) throw Object.assign(e, { type: 'Runtime.ImportModuleError' });
    if (e instanceof SyntaxError) throw Object.assign(e, { type: 'Runtime.UserCodeSyntaxError' });
    throw e;
  }
  let handler = module;
  for (const part of handlerPath.split('.')) handler = handler == null ? undefined : handler[part];
  if (handler === undefined) {
    throw Object.assign(new Error(`${base} is undefined or not exported`), { type: 'Runtime.HandlerNotFound' });
  }
  if (typeof handler !== 'function') {
    throw Object.assign(new Error(`${base} is not a function`), { type: 'Runtime.HandlerNotFound' });
  }
  return handler;
}

// --- One invocation ---------------------------------------------------------------------------------

function context() {
  const env = process.env;
  return {
    callbackWaitsForEmptyEventLoop: true,
    functionName: env.AWS_LAMBDA_FUNCTION_NAME,
    functionVersion: env.AWS_LAMBDA_FUNCTION_VERSION,
    invokedFunctionArn: INVOKED_ARN,
    memoryLimitInMB: env.AWS_LAMBDA_FUNCTION_MEMORY_SIZE,
    awsRequestId: REQUEST_ID,
    logGroupName: env.AWS_LAMBDA_LOG_GROUP_NAME,
    logStreamName: env.AWS_LAMBDA_LOG_STREAM_NAME,
    getRemainingTimeInMillis: () => Math.max(0, DEADLINE_MS - Date.now()),
  };
}

async function main() {
  let handler;
  try {
    handler = await load(process.env.LAMBDA_TASK_ROOT, process.env._HANDLER);
  } catch (e) {
    fail(e, e.type, 'init');
    return;
  }
  currentRequestId = REQUEST_ID;
  process.on('uncaughtException', (e) => fail(e, undefined, 'invoke'));
  process.on('unhandledRejection', (reason) => fail(reason, 'Runtime.UnhandledPromiseRejection', 'invoke'));
  const event = JSON.parse(fs.readFileSync(EVENT, 'utf8'));
  const ctx = context();
  const outcome = new Promise((resolve, reject) => {
    const callback = (error, value) => (error ? reject(error) : resolve(value));
    Object.assign(ctx, { done: callback, succeed: (v) => resolve(v), fail: (e) => reject(e) });
    try {
      const returned = handler(event, ctx, callback);
      if (returned && typeof returned.then === 'function') returned.then(resolve, reject);
      else if (handler.length < 3) resolve(returned);
    } catch (e) {
      reject(e);
    }
  });
  try {
    const value = await outcome;
    finish({ ok: true, payload: value === undefined ? null : value });
  } catch (e) {
    fail(e, undefined, 'invoke');
  }
}

main();

import { createServer, type IncomingMessage } from 'node:http';
import { createNodeRequest, errorResult, writeResponse } from '@payhook/core';
import { describeAdapterConformance, runningApp } from '../../../test/conformance/adapter-conformance.js';

// The whole adapter conformance suite (every row of the status table, the Standard Webhooks rows
// included) with the receiver's crypto forced to Web Crypto, on a plain node:http server mounted
// through core's node layer: the verdicts, codes and headers the Node path gives, from the path a
// browser, Worker or Deno bundle takes.

const toRequest = createNodeRequest<IncomingMessage>({
  incoming: (req) => req,
  clientIp: (req) => req.socket.remoteAddress,
});

describeAdapterConformance('node:http with Web Crypto', {
  modes: ['raw'],
  receiverOptions: { crypto: 'web' },
  async start(receiver, { host, failBefore }) {
    const server = createServer((req, res) => {
      if (failBefore) {
        writeResponse(res, errorResult(failBefore, receiver.logger));
        return;
      }
      if (!(req.url ?? '').startsWith('/webhooks')) {
        res.statusCode = 404;
        res.end();
        return;
      }
      receiver.handle(toRequest(req)).then(
        (result) => writeResponse(res, result),
        (error) => writeResponse(res, errorResult(error, receiver.logger)),
      );
    });
    return runningApp(server.listen(0, host), host);
  },
});

/**
 * Client for the monarch_jupyter server extension.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

/** The server extension's URL namespace. */
export const API_NAMESPACE = 'monarch-jupyter';

/** Request `endPoint` under the extension namespace (GET unless `init` says) and return the parsed JSON. */
export async function requestAPI<T>(
  endPoint: string,
  settings: ServerConnection.ISettings = ServerConnection.makeSettings(),
  init: RequestInit = {}
): Promise<T> {
  const url = URLExt.join(settings.baseUrl, API_NAMESPACE, endPoint);
  let response: Response;
  try {
    response = await ServerConnection.makeRequest(url, init, settings);
  } catch (error) {
    throw new ServerConnection.NetworkError(error as TypeError);
  }
  const body = await response.text();
  let data: any = body;
  try {
    data = body ? JSON.parse(body) : null;
  } catch {
    // Not JSON: keep the text for the error message below.
  }
  if (!response.ok) {
    throw new ServerConnection.ResponseError(response, data?.message ?? body);
  }
  return data as T;
}
